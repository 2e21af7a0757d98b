#include "common/harness/pass_list.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"

namespace suite {

std::string_view pass_name(Pass p) {
  return p == Pass::fwd ? "fwd" : "fwd_bwd";
}

std::vector<Pass> parse_pass_list(const std::string& flag, const std::string& text) {
  std::vector<Pass> out;
  for (const std::string& item : split_list(text)) {
    Pass p;
    if (item == "fwd")
      p = Pass::fwd;
    else if (item == "fwd_bwd")
      p = Pass::fwd_bwd;
    else
      throw UsageError(flag + ": unknown pass '" + item + "' (fwd, fwd_bwd)");
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  if (out.empty()) throw UsageError(flag + " names no pass (fwd, fwd_bwd)");
  return out;
}

DType parse_grad_dtype_flag(const std::string& text, DType storage) {
  if (text == "auto") return storage == DType::fp64 ? DType::fp64 : DType::fp32;
  const auto t = parse_dtype(text);
  if (!t) throw UsageError("--grad-dtype: unknown type '" + text + "' (auto, fp32, bf16, fp64)");
  return *t;
}

void add_pass_flag(CLI::App& app, std::string& passes) {
  app.add_option("--pass", passes, kPassHelp)->capture_default_str();
}

}  // namespace suite

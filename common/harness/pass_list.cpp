#include "common/harness/pass_list.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"

namespace suite {

std::string_view pass_name(Pass p) {
  return p == Pass::fwd ? "fwd" : "fwd_bwd";
}

Pass parse_pass(const std::string& item) {
  return named<Pass>("--pass", "pass", {{"fwd", Pass::fwd}, {"fwd_bwd", Pass::fwd_bwd}})(item);
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

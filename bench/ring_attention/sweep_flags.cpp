#include "bench/ring_attention/sweep_flags.hpp"

#include "bench/ring_attention/packed_documents.hpp"
#include "common/errors.hpp"
#include "common/size_list.hpp"

namespace suite::ring {
namespace {

template <class T, class Parse>
std::vector<T> parse_each(const std::string& flag, const std::string& text, Parse parse,
                          const std::string& allowed) {
  std::vector<T> out;
  for (const auto& item : split_list(text)) {
    auto v = parse(item);
    if (!v) throw UsageError(flag + ": unknown value '" + item + "' (" + allowed + ")");
    out.push_back(*v);
  }
  if (out.empty()) throw UsageError(flag + " names nothing");
  return out;
}

}  // namespace

std::vector<Layout> parse_layouts(const std::string& flag, const std::string& text) {
  return parse_each<Layout>(flag, text, parse_layout,
                            "contiguous, zigzag, striped; with --docs also doc_zigzag, balanced");
}

std::vector<bool> parse_causal_list(const std::string& flag, const std::string& text) {
  return parse_each<bool>(
      flag, text,
      [](const std::string& v) -> std::optional<bool> {
        if (v == "1") return true;
        if (v == "0") return false;
        return std::nullopt;
      },
      "0, 1");
}

kernels::AttnKernelChoice parse_attn_kernel_flag(const std::string& text) {
  auto k = kernels::parse_attn_kernel(text);
  if (!k) throw UsageError("--attn-kernel: unknown kernel '" + text + "' (auto, suite, cudnn)");
  return *k;
}

void add_balanced_chunk_flag(CLI::App& app, std::int64_t& chunk, const std::string& note) {
  app.add_option("--balanced-chunk", chunk, std::string(kBalancedChunkHelp) + note)
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
}

}  // namespace suite::ring

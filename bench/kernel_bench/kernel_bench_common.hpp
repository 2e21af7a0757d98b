// Shared by the kernel benchmark cases: FLOP counts and the rate counters every case reports.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device/device_peak.hpp"
#include "kernels/attention/attention_index.hpp"

namespace suite::bench {

struct AttentionCase {
  std::int64_t s;  // tokens in the query block = tokens in the key block
  int heads, kv_heads, head_dim;
  bool causal;
};

inline std::string attention_case_name(const AttentionCase& c) {
  // Appended piecewise: "literal" + std::string trips a GCC 12 -Wrestrict false positive.
  std::string name = "s";
  name += std::to_string(c.s);
  name += "_a";
  name += std::to_string(c.heads);
  name += "_kv";
  name += std::to_string(c.kv_heads);
  name += "_d";
  name += std::to_string(c.head_dim);
  name += c.causal ? "_causal" : "_full";
  return name;
}

// Forward attention FLOPs: q k^T and P V, 2 d FLOPs each per visible (query, key) pair and
// head. Causal blocks count exactly the visible pairs (the diagonal block: s (s + 1) / 2).
inline double attention_flops(const AttentionCase& c, const std::vector<std::int64_t>& pos) {
  const auto n = static_cast<std::int64_t>(pos.size());
  bool contiguous = true;  // positions 0..n-1: count in closed form (the s = 32K sweep)
  for (std::int64_t i = 0; i < n && contiguous; ++i)
    contiguous = pos[i] == i;
  const double pairs =
      contiguous
          ? (c.causal ? 0.5 * static_cast<double>(n) * static_cast<double>(n + 1)
                      : static_cast<double>(n) * static_cast<double>(n))
          : static_cast<double>(kernels::visible_pairs(c.causal, pos.data(), n, pos.data(), n));
  return 4.0 * c.head_dim * c.heads * pairs;
}

// Backward attention FLOPs (METHODS.md section 5): five matmuls instead of two, 10 d FLOPs per
// visible pair and head: 2.5x the forward's.
inline double attention_bwd_flops(const AttentionCase& c, const std::vector<std::int64_t>& pos) {
  return 2.5 * attention_flops(c, pos);
}

// --attn-kernel=LIST: names among suite, cudnn, auto, all; throws std::invalid_argument.
inline std::vector<std::string> parse_attn_kernel_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    if (item != "suite" && item != "cudnn" && item != "auto" && item != "all")
      throw std::invalid_argument("--attn-kernel: unknown kernel '" + item +
                                  "' (suite, cudnn, auto, all)");
    out.push_back(item);
    start = comma + 1;
  }
  return out;
}

// Reports achieved FLOP/s (from the manual iteration times) and, where the peak is known
// (> 0), the peak beside it, the fraction, and impossible = 1 when the rate exceeds it.
inline void report_rate(benchmark::State& state, double flops_per_iter, double total_seconds,
                        double peak) {
  const double achieved =
      total_seconds > 0 ? flops_per_iter * static_cast<double>(state.iterations()) / total_seconds
                        : 0.0;
  state.counters["FLOP/s"] =
      benchmark::Counter(achieved, benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  state.counters["FLOP_per_iter"] = flops_per_iter;
  if (peak <= 0) return;  // unknown (a CPU without --peak-gflops): no fraction to print
  state.counters["peak_FLOP/s"] =
      benchmark::Counter(peak, benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  state.counters["frac_of_peak"] = achieved / peak;
  state.counters["impossible"] = impossible_rate(achieved, peak) ? 1.0 : 0.0;
}

void register_cpu_cases(double cpu_peak_flops);
#if defined(SUITE_HAVE_CUDA)
// Registers GPU cases only when a device is visible; returns its name, or "" when there is
// none. attn_kernels: parse_attn_kernel_list's names; throws std::invalid_argument when one
// is unavailable.
std::string register_cuda_cases(const std::vector<std::string>& attn_kernels);
#endif

}  // namespace suite::bench

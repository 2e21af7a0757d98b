// Shared by the kernel benchmark cases: FLOP counts and the rate counters every case reports.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/kernels/device_peak.hpp"
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
  return 4.0 * c.head_dim * c.heads *
         static_cast<double>(kernels::visible_pairs(c.causal, pos.data(), n, pos.data(), n));
}

// Reports achieved FLOP/s (from the manual iteration times), the peak beside it (0 =
// unknown), and impossible = 1 when the achieved rate exceeds a known peak.
inline void report_rate(benchmark::State& state, double flops_per_iter, double total_seconds,
                        double peak) {
  const double achieved =
      total_seconds > 0 ? flops_per_iter * static_cast<double>(state.iterations()) / total_seconds
                        : 0.0;
  state.counters["FLOP/s"] =
      benchmark::Counter(achieved, benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  state.counters["peak_FLOP/s"] =
      benchmark::Counter(peak, benchmark::Counter::kDefaults, benchmark::Counter::kIs1000);
  state.counters["frac_of_peak"] = peak > 0 ? achieved / peak : 0.0;
  state.counters["impossible"] = impossible_rate(achieved, peak) ? 1.0 : 0.0;
  state.counters["FLOP_per_iter"] = flops_per_iter;
}

void register_cpu_cases(double cpu_peak_flops);
#if defined(SUITE_HAVE_CUDA)
// Registers GPU cases only when a device is visible; returns whether it did.
bool register_cuda_cases();
#endif

}  // namespace suite::bench

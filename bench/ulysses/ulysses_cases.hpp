// ulysses' benchmark cases: one per (context-parallel size, Ulysses degree, s, layout, causal),
// ring attention (u = 1), hybrids and plain Ulysses (u = N_c) side by side on the same inputs,
// with bytes per part against METHODS.md and per-phase times.
#pragma once

#include <optional>
#include <vector>

#include "bench/ulysses/ulysses_config.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ulysses {

struct UlyssesSweep : ring::AttentionShape {
  std::vector<std::int64_t> seq;      // s (or tokens per rank with per_rank)
  bool seq_per_rank = false;          // s = value * N_c: s and N_c grow together
  std::vector<int> cp;                // 0 = all ranks
  std::vector<int> degrees;           // u; empty = every degree the heads allow
  std::vector<ring::Layout> layouts;  // of the ring part
  std::vector<ring::Variant> ring_variants{ring::Variant::ring};  // ring or groupcast
  std::vector<bool> causal;
  bool kv_replicate = false;
  std::vector<Pass> passes{Pass::fwd};
  DType grad_dtype = DType::fp32;
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
  std::optional<ring::DocSpec> docs;  // --docs: packed documents
};

std::vector<CaseSpec> ulysses_cases(BenchContext& ctx, const UlyssesSweep& sweep);

void print_ulysses_table(const std::vector<CaseRecord>& records);

}  // namespace suite::ulysses

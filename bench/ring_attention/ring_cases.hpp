// ring_attention's benchmark cases: one per (block size, layout, variant, causal), each run
// overlapped (timed by the harness), compute only and transfer only, with F, W, c* and the
// per-rank per-round work, compute, transfer and idle figures beside METHODS.md's predictions.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "bench/ring_attention/ring_config.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

struct RingSweep : AttentionShape {
  std::vector<std::int64_t> blocks;  // c
  std::vector<Layout> layouts;
  std::vector<Variant> variants;
  std::vector<bool> causal;
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
  bool poll_progress = !sim::kSmpiBuild;  // RingConfig::poll_progress
  std::vector<Pass> passes{Pass::fwd};
  DType grad_dtype = DType::fp32;  // the travelling dK/dV partial sums (--grad-dtype)
  std::optional<DocSpec> docs;     // --docs: packed documents, drawn per case's s with --seed
  bool block_calls = false;        // --varlen-calls block: RingConfig::block_calls
};

// Validates every case for this job (UsageError) and builds them; ctx.comm is the
// context-parallel group (the job, or --cp consecutive ranks: BenchDefinition::mesh).
std::vector<CaseSpec> ring_cases(BenchContext& ctx, const RingSweep& sweep);

// shared_memory_cpu: CPU ranks exchanging through the host's memory (no simulator, no real
// link), where the table says why the transfer cannot hide.
void print_ring_table(const std::vector<CaseRecord>& records, bool shared_memory_cpu);

}  // namespace suite::ring

// The moe benchmark's cases: one per point of the sweep (tokens, experts, skew and its knob,
// capacity factor) and pass (--pass: the forward, or forward then backward), each an MoE layer
// on EP groups of N_e consecutive ranks.
#pragma once

#include <vector>

#include "bench/moe/moe_config.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::moe {

struct MoeSweep {
  MoeConfig base;  // h, d_ff, k, mlp, balance; the swept fields are overwritten
  std::vector<std::int64_t> tokens;
  std::vector<std::int64_t> experts;
  std::vector<Skew> skews;
  std::vector<double> alphas, capacity_factors;
  std::vector<double> hot_factors;  // empty: default_hot_factor(E, k) per case
  std::vector<Pass> passes{Pass::fwd};
  std::vector<Dispatch> dispatches{Dispatch::flat};
  int ranks_per_node = 0;         // 0: the placement's (ranks sharing this rank's host, within N_e)
  std::vector<int> max_nodes{0};  // node-limited routing per case (0: unlimited)
  std::vector<int> redundant{0};  // EPLB redundant experts per case (0: block placement)
  std::vector<int> microbatches{1};  // --overlap: micro-batches per case (1: none)
};

// Ranks per node inside a group of n_e: `requested`, or where it is 0 the ranks sharing this
// rank's host (cut to divide n_e), the same on every rank. Collective over the job.
int resolve_ranks_per_node(BenchContext& ctx, int requested, int n_e);

// Validates every point (UsageError naming the first bad one) and builds the cases.
std::vector<CaseSpec> moe_cases(BenchContext& ctx, const MoeSweep& sweep);

}  // namespace suite::moe

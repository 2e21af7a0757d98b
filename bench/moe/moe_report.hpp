// The figures an MoE case records (docs/RESULTS_SCHEMA.md, moe section): loads per expert and
// per rank, drops, the auxiliary loss, bytes measured vs implied by the routing vs the uniform
// prediction, dispatch/combine algbw and busbw, the all-to-all / expert time ratio against
// METHODS.md's prediction, and the balancing history; for the fwd_bwd pass the backward's
// bytes, FLOPs, time ratio and gradient errors beside theirs. Also the tables rank 0 prints.
#pragma once

#include <array>
#include <cmath>
#include <vector>

#include "bench/moe/moe_calibrate.hpp"
#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_layer.hpp"
#include "common/harness/bench_case.hpp"

namespace suite::moe {

// What one rank knows after the last timed step.
struct RankFacts {
  std::vector<double> group_kept;      // [E] copies each expert of this rank's group accepted
  std::vector<double> group_routed;    // [E] copies routed to each expert before drops
  std::vector<double> group_prob_sum;  // [E] router probability summed over the group's tokens
  StepBytes measured, implied;
  double expert_flops = 0, recv_rows = 0, dropped = 0;
  Rates rates;
  CollectiveCalls fwd_calls;
  // fwd_bwd: the backward's bytes (by phase), expert GEMM FLOPs and collective calls, and the
  // check's largest gradient errors (input, expert weights, router weight, gates; NaN when not
  // checked).
  StepBytes bwd_measured, bwd_implied;
  double bwd_expert_flops = 0;
  CollectiveCalls bwd_calls;
  std::array<double, 4> grad_err{NAN, NAN, NAN, NAN};
};

// Collective over the job (gathers to rank 0); fills rec on rank 0.
void report_case(const MoeConfig& c, const Measurement& m, const RankFacts& facts,
                 const std::vector<double>& balance_history, CaseRecord& rec);

void print_moe_table(const std::vector<CaseRecord>& records);

}  // namespace suite::moe

// SP vs TP at the level of their collectives: one all-reduce (TP, after each row-parallel
// matmul) against reduce-scatter + all-gather of the same n bytes (SP's g_bar then g).
// METHODS.md: both move 2 (t-1)/t * n bytes per rank; SP costs no extra bandwidth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::sp_tp {

enum class CollectiveOp { all_reduce, rs_ag };

struct CollectiveSize {
  std::int64_t n_bytes;
  std::string label;                 // "n1M" or "act_s4096_b1_h8192"
  std::int64_t s = 0, b = 0, h = 0;  // set for the activation-sized case
};

// Validates sizes against the group (divisible by t * element size) and builds one case per
// (op, size). Throws UsageError naming the bad size.
std::vector<CaseSpec> collective_cases(BenchContext& ctx, const std::vector<CollectiveOp>& ops,
                                       const std::vector<CollectiveSize>& sizes);

// Prints all-reduce vs reduce-scatter + all-gather side by side (rank 0, after the run).
void print_collective_table(const std::vector<CaseRecord>& records);

}  // namespace suite::sp_tp

// `moe --mode a2a`: one all-to-all-v over any traffic matrix (a2a_traffic.hpp), by three
// algorithms on the run's transport:
//   flat:         one all-to-all-v over the group;
//   pairwise:     N steps, step i sending to rank + i and receiving from rank - i (one
//                 all-to-all-v with a single non-empty peer each), timed per step: per-pair times;
//   hierarchical: what a rank sends to a node goes in one message to its rail peer there (the
//                 rank with its local index), which forwards each destination's part inside its
//                 node: M - 1 messages across the network per rank instead of P (M - 1).
// Every received block is checked element by element against the pattern its sender wrote,
// and the bytes the transport counted, per level, against the matrix.
#pragma once

#include <string>
#include <vector>

#include "bench/moe/a2a_traffic.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::moe {

enum class A2aAlgo { flat, pairwise, hierarchical };

struct A2aSweep {
  std::vector<TrafficSpec> traffic;
  std::vector<std::int64_t> bytes;  // what a rank sends in all (patterns, fractions)
  std::vector<A2aAlgo> algos;
  int ranks_per_node = 1;
};

// "flat,pairwise,hierarchical" (any subset, in order); UsageError otherwise.
std::vector<A2aAlgo> parse_a2a_algos(const std::string& text);

// Validates every point (UsageError naming the first bad one) and builds the cases.
std::vector<CaseSpec> a2a_cases(BenchContext& ctx, const A2aSweep& sweep);

void print_a2a_table(const std::vector<CaseRecord>& records);

}  // namespace suite::moe

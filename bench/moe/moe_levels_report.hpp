// The figures of an MoE case by level of the network (METHODS.md section 4.4): rows and bytes
// that stay inside a node and that cross nodes, per rank; under flat dispatch what its routing
// sends each way, under hierarchical what the transport counted on each level; beside both the
// distinct (token, other node) pairs hierarchical dispatch sends across and the uniform-routing
// prediction of either.
#pragma once

#include <array>
#include <cstdint>

#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_hierarchical.hpp"
#include "common/results/results.hpp"

namespace suite::moe {

struct LevelFacts {
  // Hierarchical: fwd dispatch, fwd combine, bwd combine, bwd dispatch (zeros under flat).
  std::array<LevelBytes, 4> levels{};
  std::int64_t flat_intra_rows = 0, flat_inter_rows = 0, distinct_inter_rows = 0;
  std::int64_t most_nodes_per_token = 0;  // over this rank's tokens, drops aside
};

// Collective over the job (gathers to rank 0); adds to rec on rank 0.
void report_levels(const MoeConfig& c, const LevelFacts& f, CaseRecord& rec);

}  // namespace suite::moe

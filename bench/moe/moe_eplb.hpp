// Where each expert's weights live: the block placement (rank r holds experts
// [r E/N, (r+1) E/N)), or EPLB's redundant experts: the R experts of highest load get one more
// replica each and every replica is packed onto the ranks by load (deepseek-ai/EPLB's
// balanced packing). A token's copy for a replicated expert goes to one of its replicas by the
// split rule (replica_for_copy).
#pragma once

#include <cstdint>
#include <vector>

namespace suite::moe {

struct ExpertPlacement {
  int experts = 0, ranks = 0, slots_per_rank = 0;
  std::vector<int> slot_expert;            // [ranks * slots_per_rank]: each slot's expert
  std::vector<std::vector<int>> replicas;  // per expert: its slots, ascending
  int owner(int slot) const { return slot / slots_per_rank; }
  int slots() const { return ranks * slots_per_rank; }
  int redundant() const { return slots() - experts; }
};

ExpertPlacement block_placement(int experts, int ranks);

// EPLB with one extra replica for each of the `redundant` most loaded experts (ties: lower
// expert first); a replica carries load / replicas. Packing (EPLB's balanced_packing, one
// variant): replicas by load descending (ties: lower expert, then lower slot), each to the rank
// with the least packed load among those with a free slot and no replica of the same expert
// (ties: lower rank); every rank gets (E + R) / ranks slots. Slots of a rank in packing order.
// Needs (E + R) % ranks == 0, 0 <= R <= E, ranks >= 2 when R > 0 (std::invalid_argument).
ExpertPlacement eplb_placement(const std::vector<double>& load, int redundant, int ranks);

// The split rule: the n-th copy (0-based, in this rank's token order) this rank routes to
// `expert` goes to its replica n mod replicas, so a source splits its copies evenly.
inline int replica_for_copy(const ExpertPlacement& p, int expert, std::int64_t n) {
  const auto& r = p.replicas[static_cast<std::size_t>(expert)];
  return r[static_cast<std::size_t>(n % static_cast<std::int64_t>(r.size()))];
}

// Load per rank of a placement: each expert's load split evenly over its replicas.
std::vector<double> rank_loads(const ExpertPlacement& p, const std::vector<double>& load);

// The busiest rank's load over the mean of rank_loads (0 where nothing is routed).
double rank_load_max_over_mean(const ExpertPlacement& p, const std::vector<double>& load);

}  // namespace suite::moe

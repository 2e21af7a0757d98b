// EPLB's placement (moe_eplb.hpp) applied to a running layer: its redundant experts placed by
// the group's loads, and a two-rank communicator per replicated expert for its gradients'
// all-reduce.
#pragma once

#include <memory>
#include <vector>

#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_layer.hpp"
#include "common/harness/context.hpp"

namespace suite::moe {

// EPLB: the group's loads under the routing of the timed steps (fixed inputs and biases, so
// what the balancing left), one more replica for the R most loaded experts, packed by load;
// a two-rank group per replicated expert for its gradients' all-reduce. Collective over the
// job: every group has R replicated experts, so every rank makes R splits.
// group_load: the group's loads under that routing. Returns the replica communicators the layer
// keeps using (one per replicated expert this job splits).
std::vector<std::unique_ptr<Comm>> place_replicas(BenchContext& ctx, const MoeConfig& cfg,
                                                  MoeLayer& layer,
                                                  const std::vector<double>& group_load);

}  // namespace suite::moe

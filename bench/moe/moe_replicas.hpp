// EPLB's placement (moe_eplb.hpp) applied to a running layer: its redundant experts placed by
// the group's loads, and a two-rank communicator per replicated expert for its gradients'
// all-reduce (a group of the expert group for the case alone: DeviceMesh::case_group).
#pragma once

#include <vector>

#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_layer.hpp"
#include "common/mesh/device_mesh.hpp"

namespace suite::moe {

// EPLB: the group's loads under the routing of the timed steps (fixed inputs and biases, so
// what the balancing left), one more replica for the R most loaded experts, packed by load;
// a two-rank group per replicated expert for its gradients' all-reduce. Collective over the
// job: every group has R replicated experts, so every rank makes R splits of its expert group
// (mesh's ep axis). group_load: the group's loads under that routing.
void place_replicas(DeviceMesh& mesh, const MoeConfig& cfg, MoeLayer& layer,
                    const std::vector<double>& group_load);

}  // namespace suite::moe

// Process groups: a method's group (TP, CP, EP) is often a slice of the job (TP inside a node
// of 8 GPUs in a job of 16). The device mesh (common/mesh/device_mesh.hpp) says which ranks
// form each group; this makes their communicators.
#pragma once

#include <memory>

#include "common/device/device.hpp"
#include "common/transport/comm.hpp"

namespace suite {

// This rank's group of the ranks of `parent` that pass the same `color` (ordered by their rank
// in parent), on parent's transport and `device`, with parent's wait observer. Collective over
// parent's ranks.
std::unique_ptr<Comm> make_split_comm(Device& device, const Comm& parent, int color);

}  // namespace suite

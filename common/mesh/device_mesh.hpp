// The communicators of a device mesh (mesh_layout.hpp), built once per mesh and handed to each
// part of a composed step: the TP group to the layer, the CP group to the attention, the expert
// group to the MoE dispatch, and the replica groups to the gradient sums. Collective over the
// job: every rank builds the same mesh at the same time.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/transport/comm.hpp"
#include "common/harness/context.hpp"
#include "common/mesh/mesh_layout.hpp"

namespace suite {

class DeviceMesh {
 public:
  DeviceMesh(BenchContext& ctx, const MeshShape& shape);

  const MeshLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  int coord(MeshAxis a) const { return layout_.coord(a, rank_); }
  // This rank's group along the axis (tp, cp, dp: the dense mesh; ep: the expert group).
  Comm& axis(MeshAxis a) { return *axes_.at(a); }
  // The C D ranks holding this rank's dense weights (DP x CP), and the T C D / E holding its
  // experts: the groups their gradients are summed over.
  Comm& dense_replicas() { return *dense_replicas_; }
  Comm& expert_replicas() { return *expert_replicas_; }
  // Inside the CP group, for Ulysses of degree u: this rank's u consecutive CP ranks, and the
  // ring across those groups (the members of the same index). Made on first use (collective
  // over the CP group), then kept.
  Comm& cp_ulysses(int u);
  Comm& cp_ring(int u);
  // Every communicator made so far, for the step's bytes; the CP group's sub-groups alone.
  std::vector<const Comm*> comms() const;
  std::vector<const Comm*> cp_sub_groups() const;

 private:
  BenchContext& ctx_;
  MeshLayout layout_;
  int rank_ = 0;
  std::map<MeshAxis, std::unique_ptr<Comm>> axes_;
  std::unique_ptr<Comm> dense_replicas_, expert_replicas_;
  std::map<int, std::pair<std::unique_ptr<Comm>, std::unique_ptr<Comm>>> cp_splits_;
};

}  // namespace suite

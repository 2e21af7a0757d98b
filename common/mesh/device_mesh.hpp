// The communicators of a device mesh (mesh_layout.hpp), handed to each part of a composed step
// (the TP group to the layer, the CP group to the attention, the expert group to the MoE
// dispatch, the replica groups to the gradient sums) and to each standalone method (its own
// axis). Each is made on first use, collective over the job (every rank asks for the same ones
// in the same order), then kept; the harness counts the bytes of all of them (comms()).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/device/device.hpp"
#include "common/mesh/mesh_layout.hpp"
#include "common/transport/comm.hpp"

namespace suite {

class DeviceMesh {
 public:
  // world: the job's communicator, which the groups are split from.
  DeviceMesh(Device& device, const Comm& world, const MeshShape& shape);

  const MeshLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  int coord(MeshAxis a) const { return layout_.coord(a, rank_); }
  // Every group is split from the whole job, so a rank whose first use of one comes while
  // another rank waits elsewhere would hang in the split, where no watchdog sees it: a
  // benchmark makes the groups it uses up front, all ranks at once (the harness its axis,
  // make_all for the composed block). The sub-groups below split one group and are made on
  // first use, by all of its ranks at the same point of the case's set-up.
  void make_all();
  // This rank's group along the axis (tp, cp, dp: the dense mesh; ep: the expert group; pp:
  // the stages' ranks in this rank's place, which a pipeline's activations hop along).
  Comm& axis(MeshAxis a);
  // The C D ranks holding this rank's dense weights (DP x CP), and the T C D / E holding its
  // experts: the groups their gradients are summed over.
  Comm& dense_replicas();
  Comm& expert_replicas();
  // Inside the CP group, for Ulysses of degree u: this rank's u consecutive CP ranks, and the
  // ring across those groups (the members of the same index).
  Comm& cp_ulysses(int u);
  Comm& cp_ring(int u);
  // Inside the expert group, for hierarchical dispatch over nodes of ranks_per_node consecutive
  // world ranks: its members on this rank's node, and the rail across nodes (the members of
  // the same index on each node). layout().ep_ranks_per_node says how many share a node.
  Comm& ep_node(int ranks_per_node);
  Comm& ep_rail(int ranks_per_node);
  // A group the running case alone needs inside this rank's group along an axis (EPLB's pair
  // per replicated expert): the members passing the same color. Made now (collective over the
  // axis group), counted like the others, dropped by drop_case_groups when the case ends.
  Comm& case_group(MeshAxis a, int color);
  void drop_case_groups();

  // Bytes each axis's communicators moved since they were made: tp; cp with its Ulysses and
  // ring sub-groups; ep with its node and rail groups and the case's groups; dp: the dense and
  // expert replica groups. Made ones only (asking makes nothing).
  ByteCounts axis_bytes(MeshAxis a) const;
  // Every communicator made so far.
  std::vector<const Comm*> comms() const;

 private:
  using Split = std::pair<std::unique_ptr<Comm>, std::unique_ptr<Comm>>;
  // The pair of sub-groups of `parent` whose colors are index / width and index % width.
  static void split_grid(Split& into, Device& device, const Comm& parent, int width);
  Comm& made(std::unique_ptr<Comm>& slot, int color);

  Device& device_;
  const Comm& world_;
  MeshLayout layout_;
  int rank_ = 0;
  std::map<MeshAxis, std::unique_ptr<Comm>> axes_;
  std::unique_ptr<Comm> dense_replicas_, expert_replicas_;
  std::map<int, Split> cp_splits_;  // by u
  std::map<int, Split> ep_splits_;  // by ranks per node
  std::vector<std::pair<MeshAxis, std::unique_ptr<Comm>>> case_groups_;
};

}  // namespace suite

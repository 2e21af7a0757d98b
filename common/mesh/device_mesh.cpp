#include "common/mesh/device_mesh.hpp"

#include "common/transport/group_comm.hpp"

namespace suite {

DeviceMesh::DeviceMesh(Device& device, const Comm& world, const MeshShape& shape)
    : device_(device), world_(world), layout_(shape, world.size()), rank_(world.rank()) {}

Comm& DeviceMesh::made(std::unique_ptr<Comm>& slot, int color) {
  if (!slot) slot = make_split_comm(device_, world_, color);
  return *slot;
}

void DeviceMesh::make_all() {
  for (MeshAxis a : {MeshAxis::tp, MeshAxis::cp, MeshAxis::ep, MeshAxis::dp})
    axis(a);
  if (layout_.pp() > 1) axis(MeshAxis::pp);
  dense_replicas();
  expert_replicas();
}

Comm& DeviceMesh::axis(MeshAxis a) {
  return made(axes_[a], layout_.group_color(a, rank_));
}

Comm& DeviceMesh::dense_replicas() {
  return made(dense_replicas_, layout_.dense_replicas_color(rank_));
}

Comm& DeviceMesh::expert_replicas() {
  return made(expert_replicas_, layout_.expert_replicas_color(rank_));
}

void DeviceMesh::split_grid(Split& into, Device& device, const Comm& parent, int width) {
  if (into.first) return;
  into.first = make_split_comm(device, parent, parent.rank() / width);
  into.second = make_split_comm(device, parent, parent.rank() % width);
}

Comm& DeviceMesh::cp_ulysses(int u) {
  split_grid(cp_splits_[u], device_, axis(MeshAxis::cp), u);
  return *cp_splits_[u].first;
}

Comm& DeviceMesh::cp_ring(int u) {
  cp_ulysses(u);
  return *cp_splits_.at(u).second;
}

Comm& DeviceMesh::ep_node(int ranks_per_node) {
  const int per_node = layout_.ep_ranks_per_node(rank_, ranks_per_node);
  split_grid(ep_splits_[ranks_per_node], device_, axis(MeshAxis::ep), per_node);
  return *ep_splits_[ranks_per_node].first;
}

Comm& DeviceMesh::ep_rail(int ranks_per_node) {
  ep_node(ranks_per_node);
  return *ep_splits_.at(ranks_per_node).second;
}

Comm& DeviceMesh::case_group(MeshAxis a, int color) {
  case_groups_.emplace_back(a, make_split_comm(device_, axis(a), color));
  return *case_groups_.back().second;
}

void DeviceMesh::drop_case_groups() {
  case_groups_.clear();
}

ByteCounts DeviceMesh::axis_bytes(MeshAxis a) const {
  if (a == MeshAxis::dp) return lifetime_bytes_of({dense_replicas_.get(), expert_replicas_.get()});
  std::vector<const Comm*> of;
  if (auto it = axes_.find(a); it != axes_.end()) of.push_back(it->second.get());
  const std::map<int, Split>* splits = a == MeshAxis::cp   ? &cp_splits_
                                       : a == MeshAxis::ep ? &ep_splits_
                                                           : nullptr;
  if (splits)
    for (const auto& [key, pair] : *splits)
      of.insert(of.end(), {pair.first.get(), pair.second.get()});
  for (const auto& [axis, comm] : case_groups_)
    if (axis == a) of.push_back(comm.get());
  return lifetime_bytes_of(of);
}

std::vector<const Comm*> DeviceMesh::comms() const {
  std::vector<const Comm*> all;
  for (const auto& [axis, comm] : axes_)
    if (comm) all.push_back(comm.get());
  for (const Comm* c : {dense_replicas_.get(), expert_replicas_.get()})
    if (c) all.push_back(c);
  for (const auto* splits : {&cp_splits_, &ep_splits_})
    for (const auto& [key, pair] : *splits)
      all.insert(all.end(), {pair.first.get(), pair.second.get()});
  for (const auto& [axis, comm] : case_groups_)
    all.push_back(comm.get());
  return all;
}

}  // namespace suite

#include "common/mesh/device_mesh.hpp"

#include "common/transport/group_comm.hpp"

namespace suite {

DeviceMesh::DeviceMesh(BenchContext& ctx, const MeshShape& shape)
    : ctx_(ctx), layout_(shape, ctx.mpi.size()), rank_(ctx.mpi.rank()) {
  for (MeshAxis a : {MeshAxis::tp, MeshAxis::cp, MeshAxis::ep, MeshAxis::dp})
    axes_[a] = make_split_comm(ctx, layout_.group_color(a, rank_));
  dense_replicas_ = make_split_comm(ctx, layout_.dense_replicas_color(rank_));
  expert_replicas_ = make_split_comm(ctx, layout_.expert_replicas_color(rank_));
}

Comm& DeviceMesh::cp_ulysses(int u) {
  auto it = cp_splits_.find(u);
  if (it == cp_splits_.end()) {
    Comm& cp = axis(MeshAxis::cp);
    auto ulysses = make_split_comm(ctx_, cp.mpi_comm(), cp.rank() / u);
    auto ring = make_split_comm(ctx_, cp.mpi_comm(), cp.rank() % u);
    it = cp_splits_.emplace(u, std::make_pair(std::move(ulysses), std::move(ring))).first;
  }
  return *it->second.first;
}

Comm& DeviceMesh::cp_ring(int u) {
  cp_ulysses(u);
  return *cp_splits_.at(u).second;
}

std::vector<const Comm*> DeviceMesh::cp_sub_groups() const {
  std::vector<const Comm*> all;
  for (const auto& [u, pair] : cp_splits_) {
    all.push_back(pair.first.get());
    all.push_back(pair.second.get());
  }
  return all;
}

std::vector<const Comm*> DeviceMesh::comms() const {
  std::vector<const Comm*> all;
  for (const auto& [axis, comm] : axes_)
    all.push_back(comm.get());
  all.push_back(dense_replicas_.get());
  all.push_back(expert_replicas_.get());
  for (const auto& [u, pair] : cp_splits_) {
    all.push_back(pair.first.get());
    all.push_back(pair.second.get());
  }
  return all;
}

}  // namespace suite

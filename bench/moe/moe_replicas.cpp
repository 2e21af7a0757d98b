#include "bench/moe/moe_replicas.hpp"

#include "bench/moe/moe_eplb.hpp"

namespace suite::moe {

void place_replicas(DeviceMesh& mesh, const MoeConfig& cfg, MoeLayer& layer,
                    const std::vector<double>& group_load) {
  const ExpertPlacement p = eplb_placement(group_load, cfg.redundant_experts, cfg.n_e);
  const int me = mesh.axis(MeshAxis::ep).rank();
  std::vector<ReplicaSync> sync;
  int i = 0;
  for (int e = 0; e < cfg.experts; ++e) {
    const auto& reps = p.replicas[static_cast<std::size_t>(e)];
    if (reps.size() < 2) continue;
    int slot = -1;
    for (int s : reps)
      if (p.owner(s) == me) slot = s - me * p.slots_per_rank;
    // The expert's two holders share a color; every other rank is alone in its own.
    const int color = slot >= 0 ? i : cfg.redundant_experts + me;
    Comm& pair = mesh.case_group(MeshAxis::ep, color);
    if (slot >= 0) sync.push_back({slot, &pair});
    ++i;
  }
  layer.set_placement(p, std::move(sync));
}

}  // namespace suite::moe

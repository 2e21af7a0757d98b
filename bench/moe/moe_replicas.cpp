#include "bench/moe/moe_replicas.hpp"

#include "bench/moe/moe_eplb.hpp"
#include "common/transport/group_comm.hpp"

namespace suite::moe {

std::vector<std::unique_ptr<Comm>> place_replicas(BenchContext& ctx, const MoeConfig& cfg,
                                                  MoeLayer& layer,
                                                  const std::vector<double>& group_load) {
  const ExpertPlacement p = eplb_placement(group_load, cfg.redundant_experts, cfg.n_e);
  const int world = ctx.mpi.rank(), group = world / cfg.n_e, me = ctx.comm.rank();
  std::vector<std::unique_ptr<Comm>> replica_comms;
  std::vector<ReplicaSync> sync;
  int i = 0;
  for (int e = 0; e < cfg.experts; ++e) {
    const auto& reps = p.replicas[static_cast<std::size_t>(e)];
    if (reps.size() < 2) continue;
    int slot = -1;
    for (int s : reps)
      if (p.owner(s) == me) slot = s - me * p.slots_per_rank;
    const int color = slot >= 0 ? group * cfg.redundant_experts + i
                                : ctx.mpi.size() * cfg.redundant_experts + world;
    replica_comms.push_back(make_split_comm(ctx, color));
    if (slot >= 0) sync.push_back({slot, replica_comms.back().get()});
    ++i;
  }
  layer.set_placement(p, std::move(sync));
  return replica_comms;
}

}  // namespace suite::moe

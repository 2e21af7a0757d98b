#include "common/formulas/dp_shard.hpp"

#include "common/harness/errors.hpp"

namespace suite::model {

namespace {

constexpr DpShard kModes[] = {DpShard::none, DpShard::optimizer, DpShard::grads, DpShard::full};

}  // namespace

const char* dp_shard_name(DpShard mode) {
  switch (mode) {
    case DpShard::none:
      return "none";
    case DpShard::optimizer:
      return "optimizer";
    case DpShard::grads:
      return "grads";
    case DpShard::full:
      return "full";
  }
  return "?";
}

std::vector<std::string> dp_shard_names() {
  std::vector<std::string> names;
  for (DpShard m : kModes)
    names.emplace_back(dp_shard_name(m));
  return names;
}

DpShard parse_dp_shard(const std::string& name) {
  for (DpShard m : kModes)
    if (name == dp_shard_name(m)) return m;
  throw UsageError("--dp-shard: unknown mode '" + name + "' (none, optimizer, grads, full)");
}

DpShardCost dp_shard_cost(DpShard mode, const DpShardSizes& s) {
  const double n = s.replicas, share = (n - 1) / n;
  const double params = s.params * s.param_bytes, grads = s.params * s.grad_bytes;
  DpShardCost c;
  c.grad_memory = grads;
  c.optimizer_memory = s.params * s.optimizer_bytes / (mode == DpShard::none ? 1 : n);
  c.param_memory = c.resting_param_memory = params;
  if (mode == DpShard::none) {
    c.all_reduce = 2 * share * grads;
    return c;
  }
  c.reduce_scatter = share * grads;
  // ZeRO-1 and grads gather the whole stage once a step; full each micro-batch's forward and
  // backward, one layer at a time.
  c.all_gather = share * params * (mode == DpShard::full ? 2.0 * s.microbatches : 1.0);
  if (mode != DpShard::optimizer) c.resting_param_memory = params / n;
  if (mode == DpShard::full) c.param_memory = params / n + s.layer_params * s.param_bytes;
  return c;
}

}  // namespace suite::model

#include "common/formulas/plan_terms.hpp"

#include "common/harness/errors.hpp"

namespace suite::model {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw UsageError("--recompute " + name + ": none, selective or full");
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "?";
}

double state_bytes_per_param(double e, DpShard shard, double ranks) {
  DpShardSizes one;
  one.params = 1;
  one.replicas = static_cast<int>(ranks);
  one.param_bytes = e;
  return dp_shard_cost(shard, one).memory();
}

double held_layer_bytes(const MeshBlock& m, Recompute r) {
  const double n = m.rows() / m.T;
  switch (r) {
    case Recompute::none:
      return mesh_ledger_bytes(m);
    case Recompute::selective:
      // With experts the second LayerNorm's output is the MoE's input copy, not the ledger's.
      return mesh_ledger_bytes(m) - n * m.h * m.e -
             (m.experts == 0 ? n * m.h * m.e + m.rows() * m.d_ff / m.T * m.e : 0);
    case Recompute::full:
      return n * m.h * m.e;
  }
  return 0;
}

double full_shard_gather_s(const MeshBlock& m, const LinkLevel& level) {
  const double n = static_cast<double>(m.C) * m.D;
  if (n <= 1) return 0;
  const double bytes = mesh_dense_params(m) * m.e;
  return 2 * (n - 1) * (level.lat + bytes / (n * level.bw));
}

pipeline::OpCosts output_layer_costs(const MeshBlock& m, double vocab, double flops) {
  const double t = 2 * m.rows() * m.h * vocab / m.T / flops;
  return {t, t, t};
}

double vocab_params(const MeshBlock& m, double vocab) {
  return m.h * vocab / m.T;
}

double logits_bytes(const MeshBlock& m, double vocab) {
  return m.rows() * vocab / m.T * 4;
}

}  // namespace suite::model

#include "bench/moe/moe_cases.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <mpi.h>

#include "bench/moe/moe_case_impl.hpp"
#include "bench/moe/moe_eplb.hpp"
#include "bench/moe/moe_reference.hpp"
#include "bench/moe/moe_replicas.hpp"
#include "common/harness/errors.hpp"
#include "common/mesh/device_meshes.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/mpi_env.hpp"

namespace suite::moe {
namespace {

constexpr std::int64_t kMaxSaved = 1 << 20;  // elements per rank and tensor, as --help says

}  // namespace

void MoeCase::setup() {
  DeviceMesh& mesh = ctx_.meshes.own();  // an EP mesh (--ep, BenchDefinition::mesh)
  Comm& group = ctx_.comm;               // its expert-parallel group
  ops_ = make_moe_ops(ctx_.device, cfg_.dtype);
  first_token_ = static_cast<std::int64_t>(ctx_.mpi.rank()) * cfg_.tokens;
  NodeComms comms;
  if (cfg_.dispatch == Dispatch::hierarchical) {
    // Nodes are P consecutive ranks inside the group; a rail is one local index of a group.
    comms = {&mesh.ep_node(cfg_.ranks_per_node), &mesh.ep_rail(cfg_.ranks_per_node)};
  }
  layer_ = std::make_unique<MoeLayer>(cfg_, ctx_.device, group, *ops_, first_token_, comms);
  select_bias_.assign(static_cast<std::size_t>(cfg_.experts), 0.0f);
  balance();
  if (cfg_.redundant_experts > 0) {
    layer_->route();
    group_load_ = layer_->group_sum(local_loads().second);
    place_replicas(mesh, cfg_, *layer_, group_load_);
  }
  // The timed steps' routing, settled before them: modeled drops (MoeLayer::settle_drops)
  // and the rows of the largest exchange where only the routing tells them. The routing is
  // the same every step (fixed inputs and biases).
  if (check_rows_ || (sim::modeled() && !cfg_.dropless())) layer_->route();
  if (check_rows_) {
    const std::int64_t rows = layer_->max_exchange_rows();
    if (static_cast<double>(rows) * static_cast<double>(cfg_.h) >
        static_cast<double>(group.max_count()))
      throw UsageError("moe: its routing sends or receives " + std::to_string(rows) + " rows of " +
                       std::to_string(cfg_.h) +
                       " elements in one all-to-all-v, above this transport's limit of " +
                       std::to_string(group.max_count()) +
                       " elements; use a capacity factor or a smaller T*k*h");
  }
  rates_ = calibrate_rates(cfg_, ctx_.device, group, *ops_, layer_->lend_exchange_buffers());
  if (cfg_.microbatches > 1) setup_overlap(comms);
}

void MoeCase::step(PhaseTimer& phases) {
  if (pipeline_) {
    if (!cfg_.backward()) return pipeline_->forward(phases);
    phases.time("forward", [&] { pipeline_->forward(phases); });
    phases.time("backward", [&] { pipeline_->backward(phases); });
    return;
  }
  if (!cfg_.backward()) return layer_->forward(phases);
  phases.time("forward", [&] { layer_->forward(phases); });
  phases.time("backward", [&] { layer_->backward(phases); });
}

CheckOutcome MoeCase::check() {
  std::string bytes_error = bytes_mismatch();
  std::string why;
  const bool own_drops = pipeline_ && !cfg_.dropless();
  if (own_drops)
    why =
        "micro-batches drop against their own share of the capacity: no reference of the "
        "whole rank's; bytes checked";
  if (own_drops || reference_too_large(cfg_, why)) {
    // Agreed before returning: a skip on one rank must not hide a byte mismatch on another.
    auto any = agree_on_error(bytes_error.empty() ? std::nullopt
                                                  : std::optional<std::string>(bytes_error));
    if (any) return {false, 0, *any};
    return {true, 0, why, true};
  }
  // The group's routing, gathered: the drop rule is checked over all of it.
  const auto& chosen = layer_->chosen();
  std::vector<double> mine;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    mine.push_back(chosen[i]);
    mine.push_back(layer_->gates()[i]);
    mine.push_back(layer_->keep()[i]);
  }
  const std::vector<double> all = layer_->group_gather(mine);
  GroupRouting routing;
  for (std::size_t i = 0; i < all.size(); i += 3) {
    routing.chosen.push_back(static_cast<std::int32_t>(all[i]));
    routing.gates.push_back(static_cast<float>(all[i + 1]));
    routing.keep.push_back(static_cast<std::uint8_t>(all[i + 2]));
  }
  ReferenceOutcome ref = check_against_reference(cfg_, layer_->group_rank(), first_token_,
                                                 select_bias_, routing, layer_->local_output());
  CheckOutcome out{ref.passed && bytes_error.empty(), ref.max_abs_err, ref.detail + bytes_error};
  if (!cfg_.backward()) return out;
  grads_ =
      check_gradients(cfg_, layer_->group_rank(), first_token_ - layer_->group_rank() * cfg_.tokens,
                      routing, layer_grads(), layer_->local_experts());
  return {out.passed && grads_->passed, std::max(out.max_abs_err, grads_->max_abs_err()),
          out.detail + grads_->detail};
}

LayerGrads MoeCase::layer_grads() const {
  LayerGrads g{layer_->input_grad(), layer_->router_weight_grad(), {}, {}, {}};
  // The pipeline writes the layer's input gradient and weight gradients; its gates are its own.
  const auto gate = pipeline_ ? pipeline_->gate_grad() : layer_->gate_grad();
  g.dgate.assign(gate.begin(), gate.end());
  const std::size_t slots = layer_->local_experts().size();
  for (std::size_t j = 0; j < slots; ++j) {
    g.dw1.push_back(layer_->expert_w1_grad(static_cast<int>(j)));
    g.dw2.push_back(layer_->expert_w2_grad(static_cast<int>(j)));
  }
  return g;
}

std::string MoeCase::bytes_mismatch() const {
  auto differ = [](const char* pass, const StepBytes& m, const StepBytes& p) -> std::string {
    if (m.control == p.control && m.dispatch == p.dispatch && m.combine == p.combine) return "";
    return std::string(pass) + " bytes sent (control, dispatch, combine) = (" +
           std::to_string(m.control) + ", " + std::to_string(m.dispatch) + ", " +
           std::to_string(m.combine) + ") but the routing implies (" + std::to_string(p.control) +
           ", " + std::to_string(p.dispatch) + ", " + std::to_string(p.combine) + "); ";
  };
  if (pipeline_) {
    std::string why = differ("forward", pipeline_->measured_bytes(), pipeline_->implied_bytes());
    if (cfg_.backward())
      why += differ("backward", pipeline_->measured_bwd_bytes(), pipeline_->implied_bwd_bytes());
    return why + pipeline_->level_mismatch() + overlap_mismatch();
  }
  std::string why = differ("forward", layer_->measured_bytes(), layer_->implied_bytes());
  if (cfg_.backward())
    why += differ("backward", layer_->measured_bwd_bytes(), layer_->implied_bwd_bytes());
  return why + layer_->level_mismatch();
}

std::vector<SavedTensor> MoeCase::tensors() {
  if (sim::modeled() && cfg_.tokens * cfg_.k <= kMaxSaved) {  // no tensor values: routing only
    auto [kept, routed] = local_loads();
    (void)routed;
    const auto& c = layer_->chosen();
    const auto& g = layer_->gates();
    const auto& k = layer_->keep();
    return {{"chosen_expert", {c.begin(), c.end()}},
            {"gate", {g.begin(), g.end()}},
            {"kept", {k.begin(), k.end()}},
            {"expert_counts", layer_->group_sum(kept)}};
  }
  if (sim::modeled()) return {};
  if (cfg_.tokens * cfg_.h > kMaxSaved || cfg_.tokens * cfg_.k > kMaxSaved) return {};
  const std::int64_t expert_weights =
      static_cast<std::int64_t>(layer_->local_experts().size()) * cfg_.h * cfg_.w1_cols();
  if (cfg_.backward() && (cfg_.h * cfg_.experts > kMaxSaved || expert_weights > kMaxSaved))
    return {};
  const auto& c = layer_->chosen();
  const auto& g = layer_->gates();
  const auto& k = layer_->keep();
  auto [kept, routed] = local_loads();
  (void)routed;
  std::vector<SavedTensor> out = {
      {"chosen_expert", {c.begin(), c.end()}}, {"gate", {g.begin(), g.end()}},
      {"kept", {k.begin(), k.end()}},          {"expert_counts", layer_->group_sum(kept)},
      {"input", layer_->local_input()},        {"output", layer_->local_output()}};
  if (!cfg_.backward()) return out;
  const LayerGrads grads = layer_grads();
  std::vector<double> w1, w2;  // local experts' gradients, concatenated
  for (std::size_t j = 0; j < grads.dw1.size(); ++j) {
    w1.insert(w1.end(), grads.dw1[j].begin(), grads.dw1[j].end());
    w2.insert(w2.end(), grads.dw2[j].begin(), grads.dw2[j].end());
  }
  out.push_back({"grad_output", layer_->grad_output()});
  out.push_back({"grad_input", grads.dx});
  out.push_back({"grad_gate", grads.dgate});
  out.push_back({"grad_router", grads.dw_router});
  out.push_back({"grad_w1", std::move(w1)});
  out.push_back({"grad_w2", std::move(w2)});
  return out;
}

std::pair<std::vector<double>, std::vector<double>> MoeCase::local_loads() const {
  std::vector<double> kept(static_cast<std::size_t>(cfg_.experts), 0.0), routed = kept;
  for (std::size_t i = 0; i < layer_->chosen().size(); ++i) {
    const auto e = static_cast<std::size_t>(layer_->chosen()[i]);
    routed[e] += 1;
    kept[e] += layer_->keep()[i];
  }
  return {kept, routed};
}

void MoeCase::balance() {
  for (int s = 0; s < cfg_.balance_steps; ++s) {
    layer_->route();
    const std::vector<double> load = layer_->group_sum(local_loads().second);
    const double mean = static_cast<double>(cfg_.k) * cfg_.tokens * cfg_.n_e / cfg_.experts;
    balance_history_.push_back(*std::max_element(load.begin(), load.end()) / mean);
    for (std::size_t e = 0; e < load.size(); ++e)
      select_bias_[e] += static_cast<float>(cfg_.balance_rate * (load[e] > mean   ? -1
                                                                 : load[e] < mean ? 1
                                                                                  : 0));
    layer_->set_select_bias(select_bias_);
  }
}

namespace {

// Rows of the largest all-to-all-v a rank takes part in (own rows included): every rank
// sends its kept copies; it receives at most every copy of the group for its experts
// (dropless) or its experts' capacity. Refused up front when even the uniform routing's k T
// rows (min(k T, capacity x its experts)) are above the transport's count limit; returns true
// when only the routing can tell (the worst case is above it): MoeCase checks it in setup.
bool check_transport_limit(BenchContext& ctx, const MoeConfig& c) {
  const std::int64_t copies = c.tokens * c.k * c.n_e;
  const std::int64_t capacity =
      kernels::moe::expert_capacity(c.capacity_factor, c.k, c.tokens * c.n_e, c.experts);
  const std::int64_t most =
      capacity < 0 ? copies : std::min(copies, capacity * c.experts_per_rank());
  const std::int64_t uniform = std::min(c.tokens * c.k, most);
  const double limit = static_cast<double>(ctx.comm.max_count()), h = static_cast<double>(c.h);
  if (static_cast<double>(uniform) * h > limit)
    throw UsageError("moe: " + case_name(c) + " sends and receives " + std::to_string(uniform) +
                     " rows of " + std::to_string(c.h) +
                     " elements per rank in one all-to-all-v even when routed uniformly, above "
                     "this transport's limit of " +
                     std::to_string(ctx.comm.max_count()) +
                     " elements; use --transport nccl, a capacity factor or a smaller T*k*h");
  return static_cast<double>(most) * h > limit;
}

// What a rank of the case holds at once, about: its parameters and fixed tensors, plus the
// largest of what comes and goes (the steps' buffers for the uniform routing's k T rows, the
// calibration's, the host's initial values where the host is the device), plus the routing. Modeled
// compute (common/sim/sim.hpp) counts only what stays real: buffers under 1 MiB (the rest are
// placeholders) and the routing.
double estimate_bytes(const MoeConfig& c, bool host_is_device) {
  const bool modeled = sim::modeled();
  const double e = static_cast<double>(dtype_size(c.dtype)), T = static_cast<double>(c.tokens),
               h = static_cast<double>(c.h), E = static_cast<double>(c.experts),
               k = static_cast<double>(c.k), ff = static_cast<double>(c.d_ff),
               w1 = static_cast<double>(c.w1_cols()), n_e = static_cast<double>(c.n_e),
               local = static_cast<double>((c.experts + c.redundant_experts) / c.n_e);
  const std::int64_t capacity =
      kernels::moe::expert_capacity(c.capacity_factor, c.k, c.tokens * c.n_e, c.experts);
  const double sent = k * T,
               rows = capacity < 0 ? sent : std::min(sent, static_cast<double>(capacity) * local);
  auto tensor = [&](double bytes, double count = 1) {
    return modeled && bytes >= static_cast<double>(sim::kPlaceholderMinBytes) ? 0.0 : bytes * count;
  };
  const int passes = c.backward() ? 2 : 1;  // the backward's gradients mirror the forward's
  const double fixed = tensor(T * h * e, 2 * passes) +       // x, out; dy, dx
                       tensor(h * E * e, passes) +           // router weight (and gradient)
                       tensor(T * E * e, passes) +           // logits (and their gradient)
                       tensor(h * w1 * e, local * passes) +  // expert weights (and gradients)
                       tensor(ff * h * e, local * passes);
  const double relays = c.dispatch == Dispatch::hierarchical ? 6 : 0;  // rail and node buffers
  const double steps = tensor(sent * h * e, (2 + relays) * passes) +   // rows out and back
                       tensor(rows * h * e, 4 * passes) +     // received, expert in/out, sent back
                       tensor(rows * (w1 + ff) * e, passes);  // hidden, activation (and grads)
  const double m = std::max(1.0, std::floor(k * T * n_e / E));
  const double calibration =
      (modeled ? 0.0 : (m * h + h * w1 + m * w1) * e) + tensor(sent * h * e, 2);
  const double host =  // the initial values, drawn on the host
      modeled || !host_is_device ? 0.0 : std::max(T * h, h * w1) * 8;
  // The routing: per copy chosen, gates, keep, slot positions and send rows (host and device),
  // per received row the regroup plan; under a capacity factor the executed layer's
  // all-gathered routing of the group, the modeled one's exchange with the owners.
  double routing = sent * 50 + rows * 32 + E * n_e * 8 + E * 64;
  if (capacity >= 0) routing += modeled ? sent * 24 : sent * n_e * 50;
  return fixed + std::max({steps, calibration, host}) + routing;
}

CaseSpec make_spec(BenchContext& ctx, const MoeConfig& cfg) {
  CaseSpec spec;
  spec.name = case_name(cfg);
  spec.params = {{"dtype", std::string(dtype_name(cfg.dtype))},
                 {"tokens", cfg.tokens},
                 {"h", cfg.h},
                 {"d_ff", cfg.d_ff},
                 {"experts", std::int64_t{cfg.experts}},
                 {"top_k", std::int64_t{cfg.k}},
                 {"mlp", std::string(mlp_name(cfg.mlp))},
                 {"skew", std::string(skew_name(cfg.skew))},
                 {"alpha", cfg.skew == Skew::zipf ? cfg.alpha : 0.0},
                 {"hot_factor", cfg.skew == Skew::hot ? cfg.hot_factor : 1.0},
                 {"capacity_factor", cfg.capacity_factor},
                 {"balance_steps", std::int64_t{cfg.balance_steps}},
                 {"balance_rate", cfg.balance_rate},
                 {"n_e", std::int64_t{cfg.n_e}},
                 {"groups", std::int64_t{ctx.mpi.size() / cfg.n_e}}};
  // Forward cases keep the parameters they always had (compare pairs them with baselines).
  if (cfg.dispatch == Dispatch::hierarchical || cfg.max_nodes_per_token > 0)
    spec.params.emplace_back("ranks_per_node", std::int64_t{cfg.ranks_per_node});
  if (cfg.dispatch == Dispatch::hierarchical)
    spec.params.emplace_back("dispatch", std::string(dispatch_name(cfg.dispatch)));
  if (cfg.max_nodes_per_token > 0)
    spec.params.emplace_back("max_nodes_per_token", std::int64_t{cfg.max_nodes_per_token});
  if (cfg.redundant_experts > 0)
    spec.params.emplace_back("redundant_experts", std::int64_t{cfg.redundant_experts});
  if (cfg.microbatches > 1)
    spec.params.emplace_back("microbatches", std::int64_t{cfg.microbatches});
  if (cfg.backward()) spec.params.emplace_back("pass", std::string(pass_name(cfg.pass)));
  const bool check_rows = check_transport_limit(ctx, cfg);
  spec.make = [&ctx, cfg, check_rows] { return std::make_unique<MoeCase>(ctx, cfg, check_rows); };
  spec.console_counters = {"expert_load_max_over_mean", "drop_rate", "a2a_bytes_per_rank"};
  if (cfg.backward())
    spec.console_counters.insert(spec.console_counters.end(),
                                 {"fwd_bwd_a2a_bytes_per_rank", "bwd_over_fwd_time"});
  return spec;
}

}  // namespace

int resolve_ranks_per_node(BenchContext& ctx, int requested, int n_e) {
  if (requested < 0) throw UsageError("moe: --ranks-per-node must be >= 0 (0: the placement's)");
  if (requested > 0) {
    if (n_e % requested != 0)
      throw UsageError(
          "moe: --ranks-per-node " + std::to_string(requested) +
          " does not divide the expert-parallel group size N_e = " + std::to_string(n_e));
    return requested;
  }
  int p = std::max(1, std::min(ctx.mpi.local_size(), n_e));
  while (n_e % p != 0)
    --p;
  // Every rank must agree (the nodes are cut the same way everywhere): the smallest.
  int agreed = p;
  SUITE_MPI_CHECK(MPI_Allreduce(&p, &agreed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return agreed;
}

std::vector<CaseSpec> moe_cases(BenchContext& ctx, const MoeSweep& sweep) {
  const int n_e = ctx.comm.size();
  const int ranks_per_node = resolve_ranks_per_node(ctx, sweep.ranks_per_node, n_e);
  std::vector<CaseSpec> specs;
  for (auto T : sweep.tokens)
    for (auto E : sweep.experts)
      for (Skew skew : sweep.skews) {
        // No --hot-factor: one per-case default that is valid for this case's E and k.
        const std::vector<double> hot =
            sweep.hot_factors.empty()
                ? std::vector<double>{default_hot_factor(static_cast<int>(E), sweep.base.k)}
                : sweep.hot_factors;
        const std::vector<double> knobs = skew == Skew::zipf  ? sweep.alphas
                                          : skew == Skew::hot ? hot
                                                              : std::vector<double>{0};
        for (double knob : knobs)
          for (double cf : sweep.capacity_factors) {
            MoeConfig cfg = sweep.base;
            cfg.tokens = T;
            cfg.experts = static_cast<int>(E);
            cfg.skew = skew;
            if (skew == Skew::zipf) cfg.alpha = knob;
            if (skew == Skew::hot) cfg.hot_factor = knob;
            cfg.capacity_factor = cf;
            cfg.n_e = n_e;
            cfg.ranks_per_node = ranks_per_node;
            cfg.dtype = ctx.dtype;
            cfg.seed = ctx.opts.seed;
            if (E > 1 << 20)
              throw UsageError("moe: --experts " + std::to_string(E) + " is too large");
            validate(cfg);
            check_transport_limit(ctx, cfg);
            for (int redundant : sweep.redundant)
              for (int max_nodes : sweep.max_nodes)
                for (Dispatch dispatch : sweep.dispatches)
                  for (int mb : sweep.microbatches)
                    for (Pass pass :
                         sweep.passes) {  // each point once per pass, in the order named
                      cfg.microbatches = mb;
                      cfg.dispatch = dispatch;
                      cfg.max_nodes_per_token = max_nodes;
                      cfg.redundant_experts = redundant;
                      validate(cfg);
                      cfg.pass = pass;
                      const double need = estimate_bytes(cfg, ctx.device.backend() == Backend::cpu);
                      const double have = static_cast<double>(ctx.device.memory_available());
                      if (need > 0.9 * have)
                        throw UsageError(
                            "moe: " + case_name(cfg) + " needs about " +
                            std::to_string(static_cast<std::int64_t>(need) >> 20) +
                            " MiB per rank but only " +
                            std::to_string(static_cast<std::int64_t>(have) >> 20) +
                            " MiB are available" +
                            (sim::modeled()
                                 ? " (modeled compute: the routing and buffers under 1 MiB)"
                                 : "") +
                            "; use a smaller --tokens, --hidden, --ffn-hidden or more ranks");
                      specs.push_back(make_spec(ctx, cfg));
                    }
          }
      }
  // Knob lists are validated even when no case uses them (a typo must not pass silently).
  for (double a : sweep.alphas)
    if (!(a >= 0) || !std::isfinite(a)) throw UsageError("moe: --alpha must be >= 0");
  for (double cf : sweep.capacity_factors)
    if (!(cf >= 0) || !std::isfinite(cf))
      throw UsageError("moe: --capacity-factor must be > 0 (or 0 for dropless)");
  return specs;
}

}  // namespace suite::moe

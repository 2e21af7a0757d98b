#include "bench/mesh/mesh_case.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "bench/mesh/mesh_block.hpp"
#include "bench/sp_tp/layer_check.hpp"
#include "common/device_mesh.hpp"
#include "common/errors.hpp"
#include "common/model.hpp"
#include "common/mpi_env.hpp"
#include "common/rank_gather.hpp"
#include "common/sim.hpp"

namespace suite::mesh {
namespace {

constexpr std::int64_t kMaxSaved = 1 << 20;  // elements per saved tensor, as --help says
// The single-rank block the check runs: at most this many tokens (s D b) and weight elements.
constexpr std::int64_t kMaxReferenceTokens = 1 << 14;
constexpr std::int64_t kMaxReferenceParams = std::int64_t{1} << 24;

constexpr std::array<MeshAxis, 4> kAxes = {MeshAxis::tp, MeshAxis::cp, MeshAxis::ep, MeshAxis::dp};

using Named = std::vector<std::pair<std::string, std::vector<double>>>;

// Rank 0's named vectors to every rank.
void broadcast(Named& list) {
  int rank = 0;
  SUITE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  long long count = static_cast<long long>(list.size());
  SUITE_MPI_CHECK(MPI_Bcast(&count, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  list.resize(static_cast<std::size_t>(count));
  for (auto& [name, values] : list) {
    long long sizes[2] = {static_cast<long long>(name.size()),
                          static_cast<long long>(values.size())};
    SUITE_MPI_CHECK(MPI_Bcast(sizes, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    name.resize(static_cast<std::size_t>(sizes[0]));
    values.resize(static_cast<std::size_t>(sizes[1]));
    SUITE_MPI_CHECK(
        MPI_Bcast(name.data(), static_cast<int>(sizes[0]), MPI_CHAR, 0, MPI_COMM_WORLD));
    SUITE_MPI_CHECK(
        MPI_Bcast(values.data(), static_cast<int>(sizes[1]), MPI_DOUBLE, 0, MPI_COMM_WORLD));
  }
}

const std::vector<double>& find(const Named& list, const std::string& name) {
  for (const auto& [n, v] : list)
    if (n == name) return v;
  throw std::logic_error("the reference has no tensor " + name);
}

// max |a - b| / max(1, max |b|) (NaN: infinitely far).
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / scale;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

class MeshCase final : public BenchCase {
 public:
  MeshCase(BenchContext& ctx, MeshConfig cfg) : ctx_(ctx), cfg_(std::move(cfg)) {}

  void setup() override {
    ctx_.device.reset_allocation_peak();
    mesh_ = std::make_unique<DeviceMesh>(ctx_, cfg_.shape);
    block_ = std::make_unique<MeshBlock>(cfg_, ctx_, *mesh_);
  }

  // Phases "fwd" and "bwd" around the block's own (the layer's, the parts', the sums').
  void step(PhaseTimer& phases) override {
    const auto before = axis_sent();
    phases.time("fwd", [&] { block_->forward(phases); });
    if (cfg_.backward()) phases.time("bwd", [&] { block_->backward(phases); });
    const auto after = axis_sent();
    for (std::size_t i = 0; i < kAxes.size(); ++i)
      step_bytes_[i] = after[i] - before[i];
    if (MoeFfn* moe = block_->moe()) {
      step_ep_implied_ = moe->layer().implied_bytes().total();
      if (cfg_.backward()) step_ep_implied_ += moe->layer().implied_bwd_bytes().total();
    }
  }

  // The output, the input gradient and every weight gradient after the sums against the
  // single-rank block on the same global batch (rank 0 runs it; every rank compares its part).
  CheckOutcome check() override {
    const std::int64_t tokens = cfg_.s * cfg_.global_batch();
    model::MeshBlock mb = model_shape();
    mb.T = mb.C = mb.D = mb.E = 1;
    const double params = model::mesh_dense_params(mb) + model::mesh_expert_params(mb);
    if (tokens > kMaxReferenceTokens || params > static_cast<double>(kMaxReferenceParams))
      return {true, 0,
              "the single-rank block (" + std::to_string(tokens) + " tokens, " + num(params) +
                  " weights) is above the check's limit of " + std::to_string(kMaxReferenceTokens) +
                  " tokens and " + std::to_string(kMaxReferenceParams) + " weights",
              true};
    ReferenceBlock ref;
    if (ctx_.mpi.rank() == 0) ref = run_reference(cfg_, ctx_);
    Named rows = {{"output", std::move(ref.output)}, {"grad_input", std::move(ref.grad_input)}};
    broadcast(rows);
    broadcast(ref.weights);
    broadcast(ref.grads);

    std::vector<std::pair<std::string, double>> errors;
    sp_tp::TransformerLayer& layer = block_->layer();
    errors.emplace_back("output",
                        relative_error(layer.local_output(), reference_rows(find(rows, "output"))));
    if (cfg_.backward())
      errors.emplace_back("grad_input", relative_error(layer.local_grad_input(),
                                                       reference_rows(find(rows, "grad_input"))));
    for (const auto& [name, mine] : whole_weights(false))
      errors.emplace_back("weight_" + name, relative_error(mine, find(ref.weights, name)));
    if (cfg_.backward())
      for (const auto& [name, mine] : whole_weights(true))
        errors.emplace_back("grad_" + name, relative_error(mine, find(ref.grads, name)));

    CheckOutcome out;
    const double tol = sp_tp::layer_tolerance(cfg_.dtype);
    std::string worst;
    for (const auto& [name, err] : errors)
      if (!(err <= out.max_abs_err)) {
        out.max_abs_err = err;
        worst = name;
      }
    if (!(out.max_abs_err <= tol)) {
      out.passed = false;
      out.detail = worst + " differs from the single-rank block's by " + num(out.max_abs_err) +
                   " of its largest value (tolerance " + num(tol) + ")";
    }
    check_errors_ = errors;
    return out;
  }

  void report(const Measurement& m, CaseRecord& rec) override {
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
    const model::MeshBlock mb = model_shape();
    auto& a = rec.attrs;
    a.emplace_back("world", std::int64_t{ranks});
    a.emplace_back("expert_copies", std::int64_t{mesh_->layout().expert_copies()});
    // Bytes per axis: measured by each axis's communicators in one step, beside METHODS.md 6.
    const bool bwd = cfg_.backward();
    const std::array<double, 4> pred = {model::mesh_tp_bytes(mb, bwd),
                                        model::mesh_cp_bytes(mb, bwd), std::nan(""),
                                        bwd ? model::mesh_grad_sum_bytes(mb) : 0.0};
    std::vector<std::int64_t> table;
    for (std::size_t i = 0; i < kAxes.size(); ++i) {
      const std::string axis = mesh_axis_name(kAxes[i]);
      const std::vector<std::int64_t> all = gather_int(step_bytes_[i], ranks, rank);
      table.insert(table.end(), all.begin(), all.end());
      const auto most = all_reduce_max(std::vector<std::int64_t>{step_bytes_[i], -step_bytes_[i]});
      a.emplace_back(axis + "_bytes_per_rank", static_cast<double>(most[0]));
      a.emplace_back(axis + "_bytes_per_rank_min", static_cast<double>(-most[1]));
      if (kAxes[i] != MeshAxis::ep) a.emplace_back("pred_" + axis + "_bytes_per_rank", pred[i]);
    }
    if (cfg_.moe()) {
      // The exact EP figure is the routing's (skew-free routing is still not uniform).
      const auto mism = all_reduce_max(
          std::vector<std::int64_t>{step_ep_implied_, step_bytes_[2] != step_ep_implied_ ? 1 : 0});
      a.emplace_back("pred_ep_bytes_per_rank", static_cast<double>(mism[0]));
      a.emplace_back("ep_bytes_equal_routing", std::int64_t{mism[1] == 0 ? 1 : 0});
      a.emplace_back("pred_ep_bytes_per_rank_uniform",
                     model::mesh_ep_bytes_uniform(mb, bwd) +
                         model::moe_control_bytes_fwd(cfg_.experts, cfg_.shape.ep, cfg_.top_k,
                                                      static_cast<double>(cfg_.sp_rows()), false));
    }
    rec.int_tables.push_back(
        {"axis_bytes_sent", kAxes.size(), static_cast<std::size_t>(ranks), table});
    if (MoeFfn* moe = block_->moe()) {
      // The router's choice in the last step, [T k, ranks]: each of a rank's tokens' k experts
      // (token-major), so that a reader counts the rows the EP bytes carry without the dispatch.
      const std::vector<std::int32_t>& chosen = moe->layer().chosen();
      const std::vector<std::int64_t> mine(chosen.begin(), chosen.end());
      rec.int_tables.push_back({"router_chosen_experts", mine.size(),
                                static_cast<std::size_t>(ranks),
                                gather_int_columns(mine, ranks, rank)});
    }
    report_times(m, rec);
    const GradientSums& sums = block_->sums();
    a.emplace_back("grad_buckets",
                   std::int64_t{sums.buckets(kSumDense) + sums.buckets(kSumExpert)});
    a.emplace_back("grad_sum_overlap", sums.bucketed()
                                           ? mesh_->dense_replicas().async_all_reduce(cfg_.dtype)
                                           : std::string("after the backward"));
    report_memory(rec, mb);
    for (const auto& [name, err] : check_errors_)
      a.emplace_back("check_err_" + name, err);
  }

  // Input, output, the output gradient and the input gradient of the whole global batch in the
  // single-rank block's row order (p D b + g), and every weight and its summed gradient whole:
  // the same on every rank.
  std::vector<SavedTensor> tensors() override {
    const std::int64_t whole = cfg_.s * cfg_.global_batch() * cfg_.h;
    if (whole > kMaxSaved) return {};
    std::vector<SavedTensor> out;
    sp_tp::TransformerLayer& layer = block_->layer();
    out.push_back({"input", whole_rows(layer.local_input())});
    out.push_back({"output", whole_rows(layer.local_output())});
    if (cfg_.backward()) {
      out.push_back({"d_output", whole_rows(layer.local_d_output())});
      out.push_back({"grad_input", whole_rows(layer.local_grad_input())});
    }
    for (auto& [name, v] : whole_weights(false))
      out.push_back({"weight_" + name, std::move(v)});
    if (cfg_.backward())
      for (auto& [name, v] : whole_weights(true))
        out.push_back({"grad_" + name, std::move(v)});
    for (const SavedTensor& t : out)
      if (static_cast<std::int64_t>(t.values.size()) > kMaxSaved) return {};
    return out;
  }

  ByteCounts own_comm_bytes() const override {
    return block_ ? lifetime_bytes_of(block_->comms()) : ByteCounts{};
  }

 private:
  std::array<std::int64_t, 4> axis_sent() const {
    std::array<std::int64_t, 4> s{};
    for (std::size_t i = 0; i < kAxes.size(); ++i)
      s[i] = block_->axis_bytes(kAxes[i]).sent;
    return s;
  }

  model::MeshBlock model_shape() const {
    model::MeshBlock mb;
    mb.s = static_cast<double>(cfg_.s);
    mb.b = static_cast<double>(cfg_.b);
    mb.h = static_cast<double>(cfg_.h);
    mb.a = static_cast<double>(cfg_.heads);
    mb.n_kv = static_cast<double>(cfg_.kv());
    mb.d_ff = static_cast<double>(cfg_.ffn());
    mb.T = cfg_.shape.tp;
    mb.C = cfg_.shape.cp;
    mb.D = cfg_.shape.dp;
    mb.E = cfg_.shape.ep;
    switch (cfg_.cp_method.method) {
      case CpMethod::ring:
        mb.cp = model::MeshCp::ring;
        break;
      case CpMethod::allgather:
        mb.cp = model::MeshCp::allgather;
        break;
      case CpMethod::ulysses:
        mb.cp = model::MeshCp::ulysses;
        break;
      case CpMethod::hybrid:
        mb.cp = model::MeshCp::hybrid;
        break;
    }
    mb.u = cfg_.cp_method.u;
    mb.experts = cfg_.experts;
    mb.k = cfg_.top_k;
    mb.swiglu = cfg_.mlp == moe::Mlp::swiglu;
    mb.e = static_cast<double>(dtype_size(cfg_.dtype));
    kernels::AttentionEngine& engine = block_->layer_ops().attention_engine();
    mb.e_grad = static_cast<double>(dtype_size(cfg_.backward() ? engine.grad_type() : cfg_.dtype));
    mb.lse_e = static_cast<double>(engine.lse_elem_size());
    return mb;
  }

  // The single-rank block's rows of this rank's tokens.
  std::vector<double> reference_rows(const std::vector<double>& whole) const {
    std::vector<double> mine;
    const auto h = static_cast<std::size_t>(cfg_.h);
    for (std::int64_t r : block_->global_rows()) {
      const auto at = whole.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * h);
      mine.insert(mine.end(), at, at + static_cast<std::ptrdiff_t>(h));
    }
    return mine;
  }

  // This rank's token-wise rows of a tensor, gathered from every rank into the whole global
  // batch in the single-rank block's row order. Collective.
  std::vector<double> whole_rows(const std::vector<double>& local) const {
    const int ranks = ctx_.mpi.size();
    const std::vector<std::int64_t>& rows = block_->global_rows();
    std::vector<double> all(local.size() * static_cast<std::size_t>(ranks));
    std::vector<long long> ids(rows.size() * static_cast<std::size_t>(ranks)),
        mine(rows.begin(), rows.end());
    SUITE_MPI_CHECK(MPI_Allgather(local.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                                  all.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                                  MPI_COMM_WORLD));
    SUITE_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_LONG_LONG,
                                  ids.data(), static_cast<int>(mine.size()), MPI_LONG_LONG,
                                  MPI_COMM_WORLD));
    const auto h = static_cast<std::size_t>(cfg_.h);
    std::vector<double> whole(static_cast<std::size_t>(cfg_.s * cfg_.global_batch()) * h);
    // TP ranks of one DP x CP rank hold different rows; DP x CP replicas none twice.
    for (std::size_t i = 0; i < ids.size(); ++i)
      std::copy_n(
          all.begin() + static_cast<std::ptrdiff_t>(i * h), h,
          whole.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(ids[i]) * h));
    return whole;
  }

  // Every weight (or its gradient after the sums) whole, named as the reference names them.
  // Collective over the TP group (the layer's slices) and the expert group.
  Named whole_weights(bool grad) {
    Named out;
    sp_tp::TransformerLayer& layer = block_->layer();
    for (std::size_t i = 0; i < layer.slices().size(); ++i)
      out.emplace_back(layer.slices()[i].name, layer.gathered_param(i, grad));
    if (MoeFfn* moe = block_->moe()) {
      out.emplace_back("router",
                       grad ? moe->layer().router_weight_grad() : moe->layer().router_weight());
      auto experts = moe->gathered_experts(grad);
      for (int e = 0; e < cfg_.experts; ++e) {
        out.emplace_back("expert_w1_" + std::to_string(e),
                         std::move(experts[static_cast<std::size_t>(e)]));
        out.emplace_back("expert_w2_" + std::to_string(e),
                         std::move(experts[static_cast<std::size_t>(cfg_.experts + e)]));
      }
    }
    return out;
  }

  // Each axis's time in the step and the part of it that nothing hid (medians of the max over
  // ranks per phase, summed): TP's blocking collectives; CP's attention and, for the ring, its
  // waits for the exchange (the all-to-alls for Ulysses); EP's dispatch and combine; the
  // gradient sums.
  void report_times(const Measurement& m, CaseRecord& rec) {
    std::map<std::string, double> phase;
    for (const auto& [name, v] : m.phase_median_s)
      phase[name] = v;
    auto sum = [&](std::initializer_list<const char*> names) {
      double s = 0;
      for (const char* n : names)
        s += phase.count(n) ? phase.at(n) : 0.0;
      return s;
    };
    const double tp = sum({"fwd_comm", "bwd_comm", kSumTp});
    const double a2a = sum({"a2a_q", "a2a_k", "a2a_v", "a2a_out", "bwd_a2a_do", "bwd_a2a_dq",
                            "bwd_a2a_dk", "bwd_a2a_dv"});
    double cp = sum({"cp_attention", "bwd_cp_attention", "attention", "bwd_attention"}) + a2a;
    double cp_exposed = a2a + ring_wait_median();
    const double ep = sum({"dispatch", "combine", "bwd_combine", "bwd_dispatch"});
    const double dp = sum({kSumDense, kSumExpert, "grad_sum_start"});
    auto& a = rec.attrs;
    a.emplace_back("tp_time_s", tp);
    a.emplace_back("tp_exposed_s", tp);
    a.emplace_back("cp_time_s", cp);
    a.emplace_back("cp_exposed_s", cp_exposed);
    a.emplace_back("ep_time_s", ep);
    a.emplace_back("ep_exposed_s", ep);
    a.emplace_back("dp_time_s", dp);
    a.emplace_back("dp_exposed_s", dp);
    a.emplace_back("exposed_comm_s", tp + cp_exposed + ep + dp);
  }

  // The ring's waits for its exchanges per timed step (forward and backward), median over the
  // steps, max over ranks.
  double ring_wait_median() {
    CpAttention* cp = block_->attention();
    if (!cp) return 0;
    const std::vector<ring::RoundTimes> runs = cp->collect_times();
    const int per_step = cfg_.backward() ? 2 : 1;
    const std::size_t skip = static_cast<std::size_t>(std::max(0, ctx_.opts.warmup) * per_step);
    std::vector<double> steps;
    for (std::size_t i = skip; i + static_cast<std::size_t>(per_step) <= runs.size();
         i += static_cast<std::size_t>(per_step)) {
      double w = 0;
      for (int p = 0; p < per_step; ++p)
        for (double x : runs[i + static_cast<std::size_t>(p)].wait_s)
          w += x;
      steps.push_back(w);
    }
    double median = 0;
    if (!steps.empty()) {
      std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2),
                       steps.end());
      median = steps[steps.size() / 2];
    }
    return all_reduce_max(median);
  }

  // Memory per rank: the layer's activation ledger, the weights and gradients, the CP method's
  // own buffers, and the allocator's peak, beside METHODS.md 6's formulas.
  void report_memory(CaseRecord& rec, const model::MeshBlock& mb) {
    auto& a = rec.attrs;
    sp_tp::TransformerLayer& layer = block_->layer();
    const double e = static_cast<double>(dtype_size(cfg_.dtype));
    double weights = 0;
    for (const auto& s : layer.slices())
      weights += static_cast<double>(s.elems()) * e;
    if (MoeFfn* moe = block_->moe()) {
      const moe::MoeConfig mc = cfg_.moe_layer();
      weights +=
          static_cast<double>(cfg_.h * cfg_.experts) * e +
          moe->layer().slots() * static_cast<double>(mc.h * mc.w1_cols() + mc.d_ff * mc.h) * e;
    }
    a.emplace_back("ledger_bytes", static_cast<double>(layer.ledger_bytes()));
    a.emplace_back("pred_ledger_bytes", model::mesh_ledger_bytes(mb));
    a.emplace_back("weight_bytes", weights);
    a.emplace_back("pred_weight_bytes",
                   (model::mesh_dense_params(mb) + model::mesh_expert_params(mb)) * e);
    a.emplace_back("grad_bytes", cfg_.backward() ? weights : 0.0);
    a.emplace_back("cp_method_bytes", block_->attention()
                                          ? static_cast<double>(block_->attention()->method_bytes())
                                          : 0.0);
    const AllocationCounters alloc = ctx_.device.allocation_counters();
    a.emplace_back("device_peak_bytes",
                   static_cast<double>(all_reduce_max(static_cast<double>(alloc.peak))));
    // Per rank (rows: ledger, weights, the CP method's buffers, the allocator's peak).
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
    std::vector<std::int64_t> table;
    for (double v :
         {static_cast<double>(layer.ledger_bytes()), weights,
          block_->attention() ? static_cast<double>(block_->attention()->method_bytes()) : 0.0,
          static_cast<double>(alloc.peak)}) {
      const auto all = gather_int(static_cast<std::int64_t>(v), ranks, rank);
      table.insert(table.end(), all.begin(), all.end());
    }
    rec.int_tables.push_back({"memory_bytes", 4, static_cast<std::size_t>(ranks), table});
  }

  BenchContext& ctx_;
  MeshConfig cfg_;
  std::unique_ptr<DeviceMesh> mesh_;
  std::unique_ptr<MeshBlock> block_;
  std::array<std::int64_t, 4> step_bytes_{};
  std::int64_t step_ep_implied_ = 0;
  std::vector<std::pair<std::string, double>> check_errors_;
};

}  // namespace

CaseSpec make_case(BenchContext& ctx, const MeshConfig& cfg) {
  CaseSpec spec;
  spec.name = cfg.case_name();
  spec.params = {{"tp", std::int64_t{cfg.shape.tp}},
                 {"cp", std::int64_t{cfg.shape.cp}},
                 {"dp", std::int64_t{cfg.shape.dp}},
                 {"ep", std::int64_t{cfg.shape.ep}},
                 {"order", mesh_order_name(cfg.shape.order)},
                 {"ranks_per_node", std::int64_t{cfg.ranks_per_node}},
                 {"dtype", std::string(dtype_name(cfg.dtype))},
                 {"s", cfg.s},
                 {"b", cfg.b},
                 {"h", cfg.h},
                 {"heads", cfg.heads},
                 {"kv_heads", cfg.kv()},
                 {"d_ff", cfg.ffn()},
                 {"causal", std::int64_t{cfg.causal ? 1 : 0}},
                 {"cp_method", cfg.shape.cp > 1 ? cfg.cp_method.name() : std::string("none")},
                 {"layout", std::string(ring::layout_name(cfg.layout))},
                 {"tp_overlap", cfg.tp_overlap.name()},
                 {"experts", std::int64_t{cfg.experts}},
                 {"top_k", std::int64_t{cfg.moe() ? cfg.top_k : 0}},
                 {"mlp", std::string(cfg.moe() ? moe::mlp_name(cfg.mlp) : "gelu")},
                 {"dispatch", std::string(moe::dispatch_name(cfg.dispatch))},
                 {"grad_bucket_mb", cfg.grad_bucket_mb},
                 {"pass", std::string(pass_name(cfg.pass))},
                 {"attn_choice", std::string(kernels::attn_kernel_choice_name(cfg.attn_kernel))}};
  spec.console_counters = {"tp_bytes_per_rank", "cp_bytes_per_rank", "ep_bytes_per_rank",
                           "dp_bytes_per_rank"};
  spec.make = [&ctx, cfg] { return std::make_unique<MeshCase>(ctx, cfg); };
  return spec;
}

}  // namespace suite::mesh

#include "bench/mesh/mesh_case.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/mesh/mesh_case_impl.hpp"
#include "bench/sp_tp/layer_check.hpp"
#include "common/harness/errors.hpp"
#include "common/transport/mpi_env.hpp"

namespace suite::mesh {
namespace {

constexpr std::int64_t kMaxSaved = 1 << 20;  // elements per saved tensor, as --help says
// The single-rank block the check runs: at most this many tokens (s D b) and weight elements.
constexpr std::int64_t kMaxReferenceTokens = 1 << 14;
constexpr std::int64_t kMaxReferenceParams = std::int64_t{1} << 24;

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

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

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

void MeshCase::step(PhaseTimer& phases) {
  const auto before = axis_sent();
  phases.time("fwd", [&] { block_->forward(phases); });
  if (cfg_.backward()) phases.time("bwd", [&] { block_->backward(phases); });
  const auto after = axis_sent();
  for (std::size_t i = 0; i < kAxes.size(); ++i)
    step_bytes_[i] = after[i] - before[i];
  if (MoeFfn* moe = block_->moe()) {
    step_ep_implied_ = moe->implied_bytes(false).total();
    if (cfg_.backward()) step_ep_implied_ += moe->implied_bytes(true).total();
  }
}

CheckOutcome MeshCase::check() {
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
  using Rows = ComposedBlock::Rows;
  errors.emplace_back("output", relative_error(block_->local_rows(Rows::output),
                                               reference_rows(find(rows, "output"))));
  if (cfg_.backward())
    errors.emplace_back("grad_input", relative_error(block_->local_rows(Rows::grad_input),
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
  if (cfg_.two_batch) {
    const std::string why = two_batch_mismatch();
    if (!why.empty()) {
      out.passed = false;
      out.detail += (out.detail.empty() ? "" : "; ") + why;
    }
  }
  return out;
}

std::vector<SavedTensor> MeshCase::tensors() {
  const std::int64_t whole = cfg_.s * cfg_.global_batch() * cfg_.h;
  if (whole > kMaxSaved) return {};
  std::vector<SavedTensor> out;
  using Rows = ComposedBlock::Rows;
  out.push_back({"input", whole_rows(block_->local_rows(Rows::input))});
  out.push_back({"output", whole_rows(block_->local_rows(Rows::output))});
  if (cfg_.backward()) {
    out.push_back({"d_output", whole_rows(block_->local_rows(Rows::d_output))});
    out.push_back({"grad_input", whole_rows(block_->local_rows(Rows::grad_input))});
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

std::array<std::int64_t, 4> MeshCase::axis_sent() const {
  std::array<std::int64_t, 4> s{};
  for (std::size_t i = 0; i < kAxes.size(); ++i)
    s[i] = mesh_->axis_bytes(kAxes[i]).sent;
  return s;
}

model::MeshBlock MeshCase::model_shape() const {
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
  mb.cp = cfg_.cp_method.method;
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

std::vector<double> MeshCase::reference_rows(const std::vector<double>& whole) const {
  std::vector<double> mine;
  const auto h = static_cast<std::size_t>(cfg_.h);
  for (std::int64_t r : block_->global_rows()) {
    const auto at = whole.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * h);
    mine.insert(mine.end(), at, at + static_cast<std::ptrdiff_t>(h));
  }
  return mine;
}

std::vector<double> MeshCase::whole_rows(const std::vector<double>& local) const {
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
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(i * h), h,
                whole.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(ids[i]) * h));
  return whole;
}

Named MeshCase::whole_weights(bool grad) {
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
                 {"moe_overlap", std::string(cfg.two_batch ? "two-batch" : "none")},
                 {"pass", std::string(pass_name(cfg.pass))},
                 {"attn_choice", std::string(kernels::attn_kernel_choice_name(cfg.attn_kernel))}};
  spec.console_counters = {"tp_bytes_per_rank", "cp_bytes_per_rank", "ep_bytes_per_rank",
                           "dp_bytes_per_rank"};
  spec.make = [&ctx, cfg] { return std::make_unique<MeshCase>(ctx, cfg); };
  return spec;
}

}  // namespace suite::mesh

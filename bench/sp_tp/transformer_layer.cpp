#include "bench/sp_tp/transformer_layer.hpp"

#include <mpi.h>

#include <cmath>
#include <functional>

#include "bench/sp_tp/layer_backward.hpp"
#include "common/device/typed_host.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::sp_tp {
namespace {

// Salts that give each dropout its own random stream from the one --seed.
constexpr std::uint64_t kDropout1Salt = 0x1d1d, kDropout2Salt = 0x2d2d, kAttnDropoutSalt = 0x3a3a;

}  // namespace

TransformerLayer::TransformerLayer(const LayerConfig& cfg, Variant variant, Device& device,
                                   Comm& comm, LayerOps& ops, LayerParts parts)
    : cfg_(cfg),
      variant_(variant),
      device_(device),
      ops_(ops),
      memory_(device),
      comm_(comm, device),
      parts_(std::move(parts)),
      t_(comm.size()),
      rank_(comm.rank()) {
  const std::int64_t rows = cfg.rows(), h = cfg.h, hl = h / t_, fl = cfg.ffn() / t_,
                     al = cfg.heads / t_;
  const bool sp = variant == Variant::tp_sp;
  e_ = dtype_size(cfg.dtype);
  local_rows_ = sp ? rows / t_ : rows;
  row_offset_ = sp ? rank_ * local_rows_ : 0;
  SUITE_CHECK(cfg.dense_mlp == (parts_.ffn == nullptr), "an FfnPart replaces the dense MLP");
  SUITE_CHECK(parts_.ffn == nullptr || sp || t_ == 1, "an FfnPart works on sequence shards");
  SUITE_CHECK(parts_.attention == nullptr || cfg.fused_attention,
              "an AttentionPart keeps no score matrix");
  SUITE_CHECK(
      parts_.global_rows.empty() ||
          (static_cast<std::int64_t>(parts_.global_rows.size()) == local_rows_ && cfg.dropout == 0),
      "global rows: one per token-wise row, and no dropout");

  // Parameters: this rank's slices of the global weights (layer_params.hpp).
  slices_ = param_slices(cfg, rank_, t_);
  for (const ParamSlice& s : slices_) {
    params_.push_back(tensor(s.name, {s.rows, s.col_count()}, e_, Role::parameter));
    if (!sim::modeled()) upload(*params_.back(), slice_values(cfg.seed, s));
  }
  std::vector<std::int64_t> pos(static_cast<std::size_t>(cfg.s));
  for (std::int64_t i = 0; i < cfg.s; ++i)
    pos[static_cast<std::size_t>(i)] = i;
  positions_ = tensor("positions", {cfg.s}, sizeof(std::int64_t), Role::parameter);
  device.copy_from_host(positions_->data(), pos.data(), pos.size() * sizeof(std::int64_t));

  // Activations. Names follow METHODS.md's accounting; Role::saved is the ledger. What a part
  // keeps for its own backward (the attention's Q, K, V; the MoE layer's input) the layer does
  // not save again.
  const Role saved = Role::saved, temp = Role::temporary;
  x_ = tensor("ln1_input", {local_rows_, h}, e_, saved);
  if (!sim::modeled())  // modeled compute reads no values: none generated
    upload(*x_, row_values(Tensor::input));
  ln1_ = tensor("ln1_output", {local_rows_, h}, e_, saved);
  if (sp) ln1_full_ = tensor("ln1_output_gathered", {rows, h}, e_, temp);
  qkv_ = tensor("qkv", {rows, cfg.qkv_cols(t_)}, e_, parts_.attention ? temp : saved);
  ctx_ = tensor("attn_output", {rows, hl}, e_, saved);
  if (!parts_.attention)
    lse_ = tensor("attn_lse", {cfg.b, al, cfg.s}, ops.lse_elem_size(),
                  cfg.fused_attention ? saved : temp);
  if (!cfg.fused_attention) {
    probs_ = tensor("attn_softmax", {cfg.b, al, cfg.s, cfg.s}, e_, saved);
    probs_mask_ = tensor("attn_dropout_mask", {cfg.b, al, cfg.s, cfg.s}, 1, saved);
    probs_dropped_ = tensor("attn_dropout_output", {cfg.b, al, cfg.s, cfg.s}, e_, saved);
  }
  proj_ = tensor("row_parallel_partial", {rows, h}, e_, temp);
  reduced_ = tensor("row_parallel_reduced", {local_rows_, h}, e_, temp);
  dropped_ = tensor("dropout_output", {local_rows_, h}, e_, temp);
  mask1_ = tensor("dropout1_mask", {local_rows_, h}, 1, saved);
  h1_ = tensor("ln2_input", {local_rows_, h}, e_, saved);
  ln2_ = tensor("ln2_output", {local_rows_, h}, e_, parts_.ffn ? temp : saved);
  if (cfg.dense_mlp) {
    if (sp) ln2_full_ = tensor("ln2_output_gathered", {rows, h}, e_, temp);
    fc1_ = tensor("fc1_output", {rows, fl}, e_, saved);
    gelu_ = tensor("gelu_output", {rows, fl}, e_, saved);
    fc2_ = tensor("fc2_partial", {rows, h}, e_, temp);
    spare_ = fc2_;
  } else if (sp && cfg.tp_overlap.kind != TpOverlap::none) {
    spare_ = tensor("row_parallel_incoming", {rows, h}, e_, temp);
  }
  mask2_ = tensor("dropout2_mask", {local_rows_, h}, 1, saved);
  out_ = tensor("layer_output", {local_rows_, h}, e_, Role::output);
}

std::vector<double> TransformerLayer::row_values(Tensor t) const {
  const auto cols = column_range(0, cfg_.h);
  if (parts_.global_rows.empty()) return init_slice(cfg_.seed, t, row_offset_, local_rows_, cols);
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(local_rows_ * cfg_.h));
  for (std::int64_t r : parts_.global_rows) {
    const std::vector<double> row = init_slice(cfg_.seed, t, r, 1, cols);
    v.insert(v.end(), row.begin(), row.end());
  }
  return v;
}

const Buffer* TransformerLayer::tensor(const std::string& name, std::vector<std::int64_t> shape,
                                       std::size_t elem, Role role) {
  if (role == Role::temporary) temporaries_.push_back(name);
  return &memory_.acquire(name, std::move(shape), elem, role);
}

void TransformerLayer::upload(const Buffer& dst, const std::vector<double>& values,
                              std::size_t offset) {
  if (sim::is_placeholder(dst.data())) return;  // keeps no values: nothing to encode
  auto bytes = encode(values, cfg_.dtype);
  device_.copy_from_host(static_cast<std::byte*>(dst.data()) + offset * e_, bytes.data(),
                         bytes.size());
}

void* TransformerLayer::at(const Buffer& b, std::int64_t elems) const {
  return static_cast<std::byte*>(b.data()) + elems * static_cast<std::int64_t>(e_);
}

std::int64_t TransformerLayer::ledger_bytes() const {
  std::int64_t sum = 0;
  for (const auto& l : memory_.ledger_entries())
    sum += l.bytes;
  return sum;
}

void TransformerLayer::attention() {
  const std::int64_t hl = cfg_.h / t_, al = cfg_.heads / t_, kvl = cfg_.kv() / t_,
                     kv_cols = kvl * cfg_.head_dim(), cols = cfg_.qkv_cols(t_), b = cfg_.b,
                     s = cfg_.s;
  kernels::AttentionParams p =
      kernels::make_attention_params(s, s, static_cast<int>(al), static_cast<int>(kvl),
                                     static_cast<int>(cfg_.head_dim()), cfg_.causal);
  // Batch element bi is every b-th row: offset the pointers by bi rows, stride b rows.
  p.ld_q = p.ld_k = p.ld_v = b * cols;
  p.ld_o = b * hl;
  const auto* pos = positions_->as<std::int64_t>();
  const std::size_t lse_e = ops_.lse_elem_size();
  for (std::int64_t bi = 0; bi < b; ++bi) {
    const void* q = at(*qkv_, bi * cols);
    const void* k = at(*qkv_, bi * cols + hl);
    const void* v = at(*qkv_, bi * cols + hl + kv_cols);
    void* o = at(*ctx_, bi * hl);
    void* lse =
        static_cast<std::byte*>(lse_->data()) + bi * al * s * static_cast<std::int64_t>(lse_e);
    if (cfg_.fused_attention) {
      // Queries and keys are the same s positions: the causal mask is the top-left diagonal.
      ops_.attention(p,
                     cfg_.causal ? kernels::BlockMask::causal_top_left : kernels::BlockMask::full,
                     q, k, v, pos, pos, o, lse);
    } else {
      const std::int64_t off = bi * al * s * s;
      ops_.attention_unfused(p, cfg_.dropout, cfg_.seed ^ kAttnDropoutSalt,
                             rank_ * static_cast<int>(al), q, k, v, pos, pos, at(*probs_, off),
                             probs_mask_->as<std::uint8_t>() + off, at(*probs_dropped_, off), o,
                             lse);
    }
  }
}

void TransformerLayer::forward(PhaseTimer& phases, const std::string& prefix) {
  const std::int64_t rows = cfg_.rows(), h = cfg_.h, hl = h / t_, fl = cfg_.ffn() / t_;
  const bool sp = variant_ == Variant::tp_sp;
  const DType dt = cfg_.dtype;
  for (const auto& name : temporaries_)
    memory_.reacquire(name);
  comm_.begin_pass(&passes_[kFwd], prefix + "comm", prefix + "compute");
  auto compute = [&](auto&& f) { phases.time(prefix + "compute", f); };
  // g_bar after a row-parallel matmul: all-reduce (tp) or reduce-scatter along s (tp_sp).
  auto reduce_partial = [&](const Buffer& partial) {
    if (sp)
      comm_.reduce_scatter(phases, partial.data(), reduced_->data(),
                           static_cast<std::size_t>(local_rows_ * h), dt);
    else
      comm_.all_reduce(phases, partial.data(), reduced_->data(), static_cast<std::size_t>(rows * h),
                       dt);
  };
  // g before a column-parallel matmul: nothing (tp) or all-gather along s (tp_sp).
  auto full_rows = [&](const Buffer& local, const Buffer* gathered) -> const Buffer& {
    if (!sp) return local;
    comm_.all_gather(phases, local.data(), gathered->data(),
                     static_cast<std::size_t>(local_rows_ * h), dt);
    return *gathered;
  };

  compute([&] {
    ops_.layernorm(local_rows_, h, x_->data(), params_[0]->data(), params_[1]->data(),
                   ln1_->data());
  });
  // One sublayer between g and g_bar: the column-parallel GEMM, its middle (attention or GeLU)
  // and the row-parallel GEMM. Blocking, or under --tp-overlap ring the all-gather feeds the
  // first GEMM block by block as blocks arrive and the reduce-scatter takes the second's partial
  // products block by block (METHODS.md 1.1); under chunks:K the same by pieces of every
  // block's rows. `partial` and `spare`, the ledger's partial buffers, hold the blocks and the
  // one arriving, so the ledger is the blocking layer's.
  const bool overlapped = sp && cfg_.tp_overlap.kind != TpOverlap::none;
  // Row r0 of block j (rank j's rows) of a [rows, cols] buffer.
  auto row_of = [&](const Buffer& buf, int j, std::int64_t r0, std::int64_t cols) {
    return at(buf, (static_cast<std::int64_t>(j) * local_rows_ + r0) * cols);
  };
  const std::string exposed = prefix + "exposed_comm";
  auto sublayer = [&](const char* op_in, const Buffer& ln, const Buffer* ln_full,
                      const Buffer& w_in, const Buffer& a, std::int64_t n_in,
                      const std::function<void()>& middle, const char* op_out, const Buffer& b,
                      std::int64_t n_mid, const Buffer& w_out, const Buffer& partial,
                      const Buffer* spare) {
    comm_.set_op(prefix + op_in);
    if (overlapped)
      comm_.all_gather_matmul(
          phases, ln.data(), ln_full->data(), local_rows_, h, dt, cfg_.tp_overlap, exposed,
          [&](int j, std::int64_t r0, std::int64_t n) {
            ops_.gemm(n, n_in, h, row_of(*ln_full, j, r0, h), w_in.data(), row_of(a, j, r0, n_in));
          });
    else {
      const Buffer& in = full_rows(ln, ln_full);
      comm_.gemm(phases, [&] { ops_.gemm(rows, n_in, h, in.data(), w_in.data(), a.data()); });
    }
    comm_.set_op("");
    middle();  // timed by itself: the layer's compute, or a part's own phases
    comm_.set_op(prefix + op_out);
    if (overlapped)
      comm_.matmul_reduce_scatter(
          phases, partial.data(), spare->data(), reduced_->data(), local_rows_, h, dt,
          cfg_.tp_overlap, exposed,
          [&](int j, std::int64_t r0, std::int64_t n, void* out) {
            ops_.gemm(n, h, n_mid, row_of(b, j, r0, n_mid), w_out.data(), out);
          },
          [&](const void* x, const void* y, void* out, std::int64_t n) {
            ops_.residual_add(n, x, y, out);
          });
    else {
      comm_.gemm(phases,
                 [&] { ops_.gemm(rows, h, n_mid, b.data(), w_out.data(), partial.data()); });
      reduce_partial(partial);
    }
    comm_.set_op("");
  };
  auto attend = [&] {
    if (parts_.attention)
      parts_.attention->forward(qkv_->data(), ctx_->data(), phases);
    else
      compute([&] { attention(); });
  };
  sublayer("qkv", *ln1_, ln1_full_, *params_[4], *qkv_, cfg_.qkv_cols(t_), attend, "out_proj",
           *ctx_, hl, *params_[5], *proj_, spare_);
  compute([&] {
    ops_.dropout(local_rows_, h, cfg_.dropout, cfg_.seed ^ kDropout1Salt, row_offset_,
                 reduced_->data(), dropped_->data(), mask1_->as<std::uint8_t>());
    ops_.residual_add(local_rows_ * h, dropped_->data(), x_->data(), h1_->data());
    ops_.layernorm(local_rows_, h, h1_->data(), params_[2]->data(), params_[3]->data(),
                   ln2_->data());
  });
  if (parts_.ffn)
    parts_.ffn->forward(ln2_->data(), reduced_->data(), phases);
  else
    sublayer(
        "fc1", *ln2_, ln2_full_, *params_[6], *fc1_, fl,
        [&] { compute([&] { ops_.gelu(rows * fl, fc1_->data(), gelu_->data()); }); }, "fc2", *gelu_,
        fl, *params_[7], *fc2_, proj_);
  compute([&] {
    ops_.dropout(local_rows_, h, cfg_.dropout, cfg_.seed ^ kDropout2Salt, row_offset_,
                 reduced_->data(), dropped_->data(), mask2_->as<std::uint8_t>());
    ops_.residual_add(local_rows_ * h, dropped_->data(), h1_->data(), out_->data());
  });
  // What the backward may not use: released (poisoned when the memory poisons).
  for (const auto& name : temporaries_)
    memory_.release(name);
}

void TransformerLayer::allocate_gradients() {
  if (d_out_) return;
  Scratch grads(memory_);
  auto acquire = [&](const std::string& name, std::vector<std::int64_t> shape) {
    const std::string full = "bwd." + name;
    grads.acquire(name, std::move(shape), e_);
    return &memory_.buffer(full);
  };
  const std::int64_t h = cfg_.h;
  d_out_ = acquire("grad_output", {local_rows_, h});
  if (!sim::modeled()) upload(*d_out_, row_values(Tensor::d_output));
  grad_input_ = acquire("grad_input", {local_rows_, h});
  grad_ln_ = acquire("grad_layernorm", {kLayerNormParams, h});
  for (std::size_t i = kLayerNormParams; i < slices_.size(); ++i)
    grad_weights_.push_back(
        acquire("grad_" + slices_[i].name, {slices_[i].rows, slices_[i].col_count()}));
}

void TransformerLayer::backward(PhaseTimer& phases, bool overlap) {
  backward(phases, overlap, ledger());
}

void TransformerLayer::backward(PhaseTimer& phases, bool overlap, const Ledger& ledger) {
  allocate_gradients();
  memory_.reset_peak();
  comm_.begin_pass(&passes_[kBwd], "bwd_comm", "bwd_compute");
  const bool dense = cfg_.dense_mlp;
  const LayerWeights w{params_[0]->data(),
                       params_[2]->data(),
                       params_[4]->data(),
                       params_[5]->data(),
                       dense ? params_[6]->data() : nullptr,
                       dense ? params_[7]->data() : nullptr,
                       positions_->as<std::int64_t>()};
  const LayerGrads g{grad_ln_->data(),
                     grad_weights_[0]->data(),
                     grad_weights_[1]->data(),
                     dense ? grad_weights_[2]->data() : nullptr,
                     dense ? grad_weights_[3]->data() : nullptr,
                     grad_input_->data()};
  BackwardSetup setup{
      cfg_,  variant_,         t_,      local_rows_,      device_,    ops_,
      comm_, Scratch(memory_), overlap, parts_.attention, parts_.ffn, &parts_.grad_ready};
  layer_backward(setup, ledger, w, d_out_->data(), g, phases);
}

std::vector<double> TransformerLayer::to_host(const Buffer& b, std::size_t offset,
                                              std::size_t count) const {
  const std::size_t n = std::min(count, b.bytes() / e_ - offset);
  // A placeholder holds no values (modeled compute): zeros, as it reads, without the copies.
  if (sim::is_placeholder(b.data())) return std::vector<double>(n);
  std::vector<std::byte> host(n * e_);
  device_.copy_to_host(host.data(), static_cast<const std::byte*>(b.data()) + offset * e_,
                       host.size());
  return decode(host.data(), n, cfg_.dtype);
}

std::vector<double> TransformerLayer::local_d_output() const {
  SUITE_CHECK(d_out_ != nullptr, "no backward has run");
  return to_host(*d_out_);
}

std::vector<double> TransformerLayer::local_grad_input() const {
  SUITE_CHECK(grad_input_ != nullptr, "no backward has run");
  return to_host(*grad_input_);
}

std::vector<TransformerLayer::GradBuffer> TransformerLayer::grad_buffers() {
  SUITE_CHECK(grad_ln_ != nullptr, "no backward has run");
  std::vector<GradBuffer> g{{"layernorm", grad_ln_->data(), kLayerNormParams * cfg_.h}};
  for (std::size_t i = kLayerNormParams; i < slices_.size(); ++i)
    g.push_back({slices_[i].name, grad_weights_[i - kLayerNormParams]->data(), slices_[i].elems()});
  return g;
}

std::vector<double> TransformerLayer::param_grad(std::size_t i) const {
  SUITE_CHECK(grad_ln_ != nullptr, "no backward has run");
  if (i < kLayerNormParams)
    return to_host(*grad_ln_, i * static_cast<std::size_t>(cfg_.h),
                   static_cast<std::size_t>(cfg_.h));
  return to_host(*grad_weights_[i - kLayerNormParams]);
}

// Gathered on the host: a check must not need device memory beyond the layer's own. Over the
// layer's group (rank order in the group = row-shard order).
static std::vector<double> allgather_host(const std::vector<double>& local, MPI_Comm comm,
                                          int size) {
  std::vector<double> full(local.size() * static_cast<std::size_t>(size));
  SUITE_MPI_CHECK(MPI_Allgather(local.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                                full.data(), static_cast<int>(local.size()), MPI_DOUBLE, comm));
  return full;
}

std::vector<double> TransformerLayer::gathered_output() {
  std::vector<double> local = to_host(*out_);
  if (variant_ == Variant::tp) return local;
  return allgather_host(local, comm_.mpi_comm(), t_);
}

std::vector<double> TransformerLayer::gathered_grad_input() {
  std::vector<double> local = local_grad_input();
  if (variant_ == Variant::tp) return local;
  return allgather_host(local, comm_.mpi_comm(), t_);
}

std::vector<double> TransformerLayer::gathered_param(std::size_t i, bool grad) {
  std::vector<double> mine = grad ? param_grad(i) : param_value(i);
  if (slices_[i].replicated) return mine;
  const std::vector<double> all = allgather_host(mine, comm_.mpi_comm(), t_);
  std::vector<ParamSlice> by_rank;
  std::vector<std::vector<double>> values;
  for (int r = 0; r < t_; ++r) {
    by_rank.push_back(param_slices(cfg_, r, t_)[i]);
    values.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
                        all.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size()));
  }
  return assemble(by_rank, values);
}

void TransformerLayer::set_point(double eps) {
  for (std::size_t i = 0; i < slices_.size(); ++i)
    upload(*params_[i], slice_values(cfg_.seed, slices_[i], eps));
  std::vector<double> x =
      init_slice(cfg_.seed, Tensor::input, row_offset_, local_rows_, column_range(0, cfg_.h));
  const std::vector<double> d = input_direction(cfg_.seed, row_offset_, local_rows_, cfg_.h);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] += eps * d[i];
  upload(*x_, x);
}

double TransformerLayer::group_sum(double local) const {
  double sum = 0;
  SUITE_MPI_CHECK(MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, comm_.mpi_comm()));
  return sum;
}

double TransformerLayer::loss() {
  allocate_gradients();  // d_output
  const std::vector<double> out = local_output(), d = local_d_output();
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    s += out[i] * d[i];
  // TP holds every token on every rank: count them once.
  return group_sum(s) / (variant_ == Variant::tp ? t_ : 1);
}

double TransformerLayer::directional_derivative() {
  double replicated = 0, sharded = 0;
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const std::vector<double> g = param_grad(i), d = slice_direction(cfg_.seed, slices_[i]);
    double s = 0;
    for (std::size_t j = 0; j < g.size(); ++j)
      s += g[j] * d[j];
    (slices_[i].replicated ? replicated : sharded) += s;
  }
  const std::vector<double> gx = local_grad_input(),
                            dx = input_direction(cfg_.seed, row_offset_, local_rows_, cfg_.h);
  double sx = 0;
  for (std::size_t j = 0; j < gx.size(); ++j)
    sx += gx[j] * dx[j];
  (variant_ == Variant::tp ? replicated : sharded) += sx;
  return group_sum(sharded) + group_sum(replicated) / t_;
}

}  // namespace suite::sp_tp

#include "bench/sp_tp/transformer_layer.hpp"

#include <cmath>

#include "common/errors.hpp"
#include "common/typed_host.hpp"

namespace suite::sp_tp {
namespace {

std::vector<double> scaled(std::vector<double> v, double s) {
  for (auto& x : v)
    x *= s;
  return v;
}

// Salts that give each dropout its own random stream from the one --seed.
constexpr std::uint64_t kDropout1Salt = 0x1d1d, kDropout2Salt = 0x2d2d, kAttnDropoutSalt = 0x3a3a;

}  // namespace

TransformerLayer::TransformerLayer(const LayerConfig& cfg, Variant variant, Device& device,
                                   Comm& comm, LayerOps& ops)
    : cfg_(cfg), variant_(variant), device_(device), comm_(comm), ops_(ops) {
  const int t = comm.size(), r = comm.rank();
  const std::int64_t rows = cfg.rows(), h = cfg.h, hl = h / t, fl = cfg.ffn() / t,
                     al = cfg.heads / t;
  const bool sp = variant == Variant::tp_sp;
  e_ = dtype_size(cfg.dtype);
  local_rows_ = sp ? rows / t : rows;
  row_offset_ = sp ? r * local_rows_ : 0;
  const auto h_cols = column_range(0, h);

  // Parameters: column-parallel QKV and fc1 take this rank's columns (its heads), row-parallel
  // output projection and fc2 take the matching rows. Scaled by 1/sqrt(fan-in).
  ln1_gamma_ = tensor("ln1_gamma", {h}, e_, false);
  ln1_beta_ = tensor("ln1_beta", {h}, e_, false);
  ln2_gamma_ = tensor("ln2_gamma", {h}, e_, false);
  ln2_beta_ = tensor("ln2_beta", {h}, e_, false);
  upload(ln1_gamma_, init_slice(cfg.seed, Tensor::ln1_gamma, 0, 1, h_cols));
  upload(ln1_beta_, init_slice(cfg.seed, Tensor::ln1_beta, 0, 1, h_cols));
  upload(ln2_gamma_, init_slice(cfg.seed, Tensor::ln2_gamma, 0, 1, h_cols));
  upload(ln2_beta_, init_slice(cfg.seed, Tensor::ln2_beta, 0, 1, h_cols));
  std::vector<std::int64_t> qkv_cols;
  for (std::int64_t part = 0; part < 3; ++part)  // Q, K, V blocks of the global [h, 3h]
    for (std::int64_t c = r * hl; c < (r + 1) * hl; ++c)
      qkv_cols.push_back(part * h + c);
  const double inv_h = 1 / std::sqrt(static_cast<double>(h));
  w_qkv_ = tensor("w_qkv", {h, 3 * hl}, e_, false);
  upload(w_qkv_, scaled(init_slice(cfg.seed, Tensor::w_qkv, 0, h, qkv_cols), inv_h));
  w_out_ = tensor("w_out", {hl, h}, e_, false);
  upload(w_out_, scaled(init_slice(cfg.seed, Tensor::w_out, r * hl, hl, h_cols), inv_h));
  w_fc1_ = tensor("w_fc1", {h, fl}, e_, false);
  upload(
      w_fc1_,
      scaled(init_slice(cfg.seed, Tensor::w_fc1, 0, h, column_range(r * fl, (r + 1) * fl)), inv_h));
  w_fc2_ = tensor("w_fc2", {fl, h}, e_, false);
  upload(w_fc2_, scaled(init_slice(cfg.seed, Tensor::w_fc2, r * fl, fl, h_cols),
                        1 / std::sqrt(static_cast<double>(cfg.ffn()))));
  std::vector<std::int64_t> pos(static_cast<std::size_t>(cfg.s));
  for (std::int64_t i = 0; i < cfg.s; ++i)
    pos[static_cast<std::size_t>(i)] = i;
  positions_ = device.alloc(pos.size() * sizeof(std::int64_t));
  device.copy_from_host(positions_.data(), pos.data(), pos.size() * sizeof(std::int64_t));

  // Activations. Names follow METHODS.md's accounting; `true` marks what backward keeps.
  x_ = tensor("ln1_input", {local_rows_, h}, e_, true);
  upload(x_, init_slice(cfg.seed, Tensor::input, row_offset_, local_rows_, h_cols));
  ln1_ = tensor("ln1_output", {local_rows_, h}, e_, true);
  if (sp) ln1_full_ = tensor("ln1_output_gathered", {rows, h}, e_, false);
  qkv_ = tensor("qkv", {rows, 3 * hl}, e_, true);
  ctx_ = tensor("attn_output", {rows, hl}, e_, true);
  if (cfg.fused_attention) {
    lse_ = tensor("attn_lse", {cfg.b, al, cfg.s}, ops.lse_elem_size(), true);
  } else {
    lse_ = tensor("attn_lse", {cfg.b, al, cfg.s}, ops.lse_elem_size(), false);
    probs_ = tensor("attn_softmax", {cfg.b, al, cfg.s, cfg.s}, e_, true);
    probs_mask_ = tensor("attn_dropout_mask", {cfg.b, al, cfg.s, cfg.s}, 1, true);
    probs_dropped_ = tensor("attn_dropout_output", {cfg.b, al, cfg.s, cfg.s}, e_, true);
  }
  proj_ = tensor("row_parallel_partial", {rows, h}, e_, false);
  reduced_ = tensor("row_parallel_reduced", {local_rows_, h}, e_, false);
  dropped_ = tensor("dropout_output", {local_rows_, h}, e_, false);
  mask1_ = tensor("dropout1_mask", {local_rows_, h}, 1, true);
  h1_ = tensor("ln2_input", {local_rows_, h}, e_, true);
  ln2_ = tensor("ln2_output", {local_rows_, h}, e_, true);
  if (sp) ln2_full_ = tensor("ln2_output_gathered", {rows, h}, e_, false);
  fc1_ = tensor("fc1_output", {rows, fl}, e_, true);
  gelu_ = tensor("gelu_output", {rows, fl}, e_, true);
  fc2_ = tensor("fc2_partial", {rows, h}, e_, false);
  mask2_ = tensor("dropout2_mask", {local_rows_, h}, 1, true);
  out_ = tensor("layer_output", {local_rows_, h}, e_, false);
}

Buffer TransformerLayer::tensor(const std::string& name, std::vector<std::int64_t> shape,
                                std::size_t elem, bool saved) {
  std::int64_t n = 1;
  for (auto d : shape)
    n *= d;
  Buffer b = device_.alloc(static_cast<std::size_t>(n) * elem);
  if (saved) ledger_.push_back({name, std::move(shape), static_cast<std::int64_t>(b.bytes())});
  return b;
}

void TransformerLayer::upload(Buffer& dst, const std::vector<double>& values) {
  auto bytes = encode(values, cfg_.dtype);
  device_.copy_from_host(dst.data(), bytes.data(), bytes.size());
}

void* TransformerLayer::at(const Buffer& b, std::int64_t elems) const {
  return static_cast<std::byte*>(b.data()) + elems * static_cast<std::int64_t>(e_);
}

std::int64_t TransformerLayer::ledger_bytes() const {
  std::int64_t sum = 0;
  for (const auto& l : ledger_)
    sum += l.bytes;
  return sum;
}

void TransformerLayer::attention() {
  const int t = comm_.size();
  const std::int64_t hl = cfg_.h / t, al = cfg_.heads / t, b = cfg_.b, s = cfg_.s;
  kernels::AttentionParams p =
      kernels::make_attention_params(s, s, static_cast<int>(al), static_cast<int>(al),
                                     static_cast<int>(cfg_.head_dim()), cfg_.causal);
  // Batch element bi is every b-th row: offset the pointers by bi rows, stride b rows.
  p.ld_q = p.ld_k = p.ld_v = b * 3 * hl;
  p.ld_o = b * hl;
  const auto* pos = positions_.as<std::int64_t>();
  const std::size_t lse_e = ops_.lse_elem_size();
  for (std::int64_t bi = 0; bi < b; ++bi) {
    const void* q = at(qkv_, bi * 3 * hl);
    const void* k = at(qkv_, bi * 3 * hl + hl);
    const void* v = at(qkv_, bi * 3 * hl + 2 * hl);
    void* o = at(ctx_, bi * hl);
    void* lse =
        static_cast<std::byte*>(lse_.data()) + bi * al * s * static_cast<std::int64_t>(lse_e);
    if (cfg_.fused_attention) {
      // Queries and keys are the same s positions: the causal mask is the top-left diagonal.
      ops_.attention(p,
                     cfg_.causal ? kernels::BlockMask::causal_top_left : kernels::BlockMask::full,
                     q, k, v, pos, pos, o, lse);
    } else {
      const std::int64_t off = bi * al * s * s;
      ops_.attention_unfused(p, cfg_.dropout, cfg_.seed ^ kAttnDropoutSalt,
                             comm_.rank() * static_cast<int>(al), q, k, v, pos, pos,
                             at(probs_, off), probs_mask_.as<std::uint8_t>() + off,
                             at(probs_dropped_, off), o, lse);
    }
  }
}

void TransformerLayer::forward(PhaseTimer& phases) {
  const int t = comm_.size();
  const std::int64_t rows = cfg_.rows(), h = cfg_.h, hl = h / t, fl = cfg_.ffn() / t;
  const bool sp = variant_ == Variant::tp_sp;
  const DType dt = cfg_.dtype;
  // g_bar after a row-parallel matmul: all-reduce (tp) or reduce-scatter along s (tp_sp).
  auto reduce_partial = [&](const Buffer& partial) {
    phases.time("comm", [&] {
      if (sp)
        comm_.reduce_scatter(partial.data(), reduced_.data(),
                             static_cast<std::size_t>(local_rows_ * h), dt);
      else
        comm_.all_reduce(partial.data(), reduced_.data(), static_cast<std::size_t>(rows * h), dt);
    });
  };
  // g before a column-parallel matmul: nothing (tp) or all-gather along s (tp_sp).
  auto full_rows = [&](const Buffer& local, const Buffer& gathered) -> const Buffer& {
    if (!sp) return local;
    phases.time("comm", [&] {
      comm_.all_gather(local.data(), gathered.data(), static_cast<std::size_t>(local_rows_ * h),
                       dt);
    });
    return gathered;
  };

  phases.time("compute", [&] {
    ops_.layernorm(local_rows_, h, x_.data(), ln1_gamma_.data(), ln1_beta_.data(), ln1_.data());
  });
  const Buffer& attn_in = full_rows(ln1_, ln1_full_);
  phases.time("compute", [&] {
    ops_.gemm(rows, 3 * hl, h, attn_in.data(), w_qkv_.data(), qkv_.data());
    attention();
    ops_.gemm(rows, h, hl, ctx_.data(), w_out_.data(), proj_.data());
  });
  reduce_partial(proj_);
  phases.time("compute", [&] {
    ops_.dropout(local_rows_, h, cfg_.dropout, cfg_.seed ^ kDropout1Salt, row_offset_,
                 reduced_.data(), dropped_.data(), mask1_.as<std::uint8_t>());
    ops_.residual_add(local_rows_ * h, dropped_.data(), x_.data(), h1_.data());
    ops_.layernorm(local_rows_, h, h1_.data(), ln2_gamma_.data(), ln2_beta_.data(), ln2_.data());
  });
  const Buffer& mlp_in = full_rows(ln2_, ln2_full_);
  phases.time("compute", [&] {
    ops_.gemm(rows, fl, h, mlp_in.data(), w_fc1_.data(), fc1_.data());
    ops_.gelu(rows * fl, fc1_.data(), gelu_.data());
    ops_.gemm(rows, h, fl, gelu_.data(), w_fc2_.data(), fc2_.data());
  });
  reduce_partial(fc2_);
  phases.time("compute", [&] {
    ops_.dropout(local_rows_, h, cfg_.dropout, cfg_.seed ^ kDropout2Salt, row_offset_,
                 reduced_.data(), dropped_.data(), mask2_.as<std::uint8_t>());
    ops_.residual_add(local_rows_ * h, dropped_.data(), h1_.data(), out_.data());
  });
}

std::vector<double> TransformerLayer::to_host(const Buffer& b) const {
  std::vector<std::byte> host(b.bytes());
  device_.copy_to_host(host.data(), b.data(), host.size());
  return decode(host.data(), host.size() / e_, cfg_.dtype);
}

std::vector<double> TransformerLayer::gathered_output() {
  std::vector<double> local = to_host(out_);
  if (variant_ == Variant::tp) return local;
  // Gathered on the host: a check must not need device memory beyond the layer's own. Over
  // the layer's group (rank order in the group = row-shard order).
  std::vector<double> full(local.size() * static_cast<std::size_t>(comm_.size()));
  SUITE_MPI_CHECK(MPI_Allgather(local.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                                full.data(), static_cast<int>(local.size()), MPI_DOUBLE,
                                comm_.mpi_comm()));
  return full;
}

}  // namespace suite::sp_tp

#include "bench/mesh/cp_attention.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/harness/errors.hpp"

namespace suite::mesh {
namespace {

// The heads of this TP rank (a/T query, n_kv/T K/V heads) over the b sequences.
ring::AttentionShape tp_rank_shape(const MeshConfig& cfg) {
  return {static_cast<int>(cfg.heads / cfg.shape.tp), static_cast<int>(cfg.kv() / cfg.shape.tp),
          static_cast<int>(cfg.head_dim()), cfg.b};
}

// The ring's configuration but its variant, which the CP method picks.
ring::RingConfig ring_config(const MeshConfig& cfg, DType grad_type) {
  ring::RingConfig r;
  r.c = cfg.c();
  r.n_c = cfg.shape.cp;
  r.layout = cfg.layout;
  r.causal = cfg.causal;
  static_cast<ring::AttentionShape&>(r) = tp_rank_shape(cfg);
  r.dtype = cfg.dtype;
  r.pass = cfg.pass;
  r.grad_dtype = grad_type;  // dK/dV travel in the kernel's accumulation type
  return r;
}

// Ulysses' configuration but its degree, which the CP method picks.
ulysses::UlyssesConfig ulysses_config(const MeshConfig& cfg, DType grad_type) {
  ulysses::UlyssesConfig u;
  u.s = cfg.s;
  u.n_c = cfg.shape.cp;
  u.layout = cfg.layout;
  u.causal = cfg.causal;
  static_cast<ring::AttentionShape&>(u) = tp_rank_shape(cfg);
  u.dtype = cfg.dtype;
  u.pass = cfg.pass;
  u.grad_dtype = grad_type;
  return u;
}

}  // namespace

CpAttention::CpAttention(const MeshConfig& cfg, Device& device, DeviceMesh& mesh,
                         kernels::AttentionEngine& engine)
    : cfg_(cfg), device_(device), world_rank_(mesh.rank()), engine_(engine) {
  // A test hook: SUITE_TEST_FREEZE=R:cp stops world rank R (SIGSTOP, as a hung rank) in its first
  // forward just before its CP exchange, R:tp just after the attention, before the output
  // projection's TP reduce-scatter: the ranks that then wait on it are known in advance, so the
  // watchdog test can ask each for the rank it names.
  const char* freeze = std::getenv("SUITE_TEST_FREEZE");
  const std::string spec = freeze ? freeze : "", me = std::to_string(mesh.rank());
  if (spec == me + ":cp") freeze_ = Freeze::before_cp;
  if (spec == me + ":tp") freeze_ = Freeze::before_tp;
  const int T = cfg.shape.tp;
  rows_ = cfg.rows();
  q_cols_ = cfg.heads / T * cfg.head_dim();
  kv_cols_ = cfg.kv() / T * cfg.head_dim();
  e_ = dtype_size(cfg.dtype);
  const DType grad_type = cfg.backward() ? engine.grad_type() : cfg.dtype;
  // The method read here once: the ring's variant, or the Ulysses degree (C for plain Ulysses:
  // mesh_configs resolved it).
  const CpChoice method = cfg.cp_method;
  if (method.method == CpMethod::ring || method.method == CpMethod::allgather) {
    ring::RingConfig r = ring_config(cfg, grad_type);
    r.variant =
        method.method == CpMethod::allgather ? ring::Variant::allgather : ring::Variant::ring;
    ring::validate(r);
    ring_ = std::make_unique<ring::RingAttention>(r, device, mesh.axis(MeshAxis::cp), engine,
                                                  cfg.seed, /*generate_inputs=*/false);
    positions_ = ring_->positions();
  } else {
    ulysses::UlyssesConfig u = ulysses_config(cfg, grad_type);
    u.u = method.u;
    ulysses::validate(u);
    ulysses_ = std::make_unique<ulysses::UlyssesAttention>(u, device, mesh.cp_ulysses(u.u),
                                                           mesh.cp_ring(u.u), engine, cfg.seed,
                                                           /*generate_inputs=*/false);
    positions_ = ulysses_->positions();
  }
  SUITE_CHECK(static_cast<std::int64_t>(positions_.size()) == cfg.c(),
              "the CP method holds c tokens per rank");
  if (cfg.backward() && engine.grad_type() != cfg.dtype)
    cast_ = device.alloc(static_cast<std::size_t>(rows_ * std::max(q_cols_, kv_cols_)) * e_);
}

void CpAttention::to_method(const void* layer, std::int64_t width, std::int64_t col,
                            std::int64_t cols, void* method) const {
  device_.copy_rows_on_device(method, static_cast<std::size_t>(cols) * e_,
                              static_cast<const std::byte*>(layer) + col * e_,
                              static_cast<std::size_t>(width) * e_,
                              static_cast<std::size_t>(cols) * e_, static_cast<std::size_t>(rows_));
}

void CpAttention::to_layer(const void* method, DType src_type, std::int64_t cols, void* layer,
                           std::int64_t width, std::int64_t col) {
  if (src_type != cfg_.dtype) {  // the kernel's accumulation type: cast through cast_
    SUITE_CHECK(src_type == engine_.grad_type(), "gradients arrive in the kernel's type");
    device_.fill_zero(cast_.data(), static_cast<std::size_t>(rows_ * cols) * e_);
    engine_.accumulate(cast_.data(), cfg_.dtype, method, rows_ * cols);
    method = cast_.data();
  }
  device_.copy_rows_on_device(static_cast<std::byte*>(layer) + col * e_,
                              static_cast<std::size_t>(width) * e_, method,
                              static_cast<std::size_t>(cols) * e_,
                              static_cast<std::size_t>(cols) * e_, static_cast<std::size_t>(rows_));
}

void CpAttention::maybe_freeze(Freeze at) {
  if (freeze_ != at) return;
  freeze_ = Freeze::none;
  std::fprintf(stderr, "[rank %d] SUITE_TEST_FREEZE: stopped %s\n", world_rank_,
               at == Freeze::before_cp ? "before its CP exchange"
                                       : "before its TP exchange (after the attention)");
  std::fflush(stderr);
  std::raise(SIGSTOP);
}

void CpAttention::forward(const void* qkv, void* out, PhaseTimer& phases) {
  const std::int64_t width = q_cols_ + 2 * kv_cols_;
  const std::size_t out_bytes = static_cast<std::size_t>(rows_ * q_cols_) * e_;
  phases.time("cp_copy", [&] {
    if (ring_) {
      auto* kv = static_cast<std::byte*>(ring_->kv_buffer());
      to_method(qkv, width, 0, q_cols_, ring_->q_buffer());
      to_method(qkv, width, q_cols_, kv_cols_, kv);
      to_method(qkv, width, q_cols_ + kv_cols_, kv_cols_,
                kv + static_cast<std::size_t>(rows_ * kv_cols_) * e_);
    } else {
      to_method(qkv, width, 0, q_cols_, ulysses_->q_input());
      to_method(qkv, width, q_cols_, kv_cols_, ulysses_->k_input());
      to_method(qkv, width, q_cols_ + kv_cols_, kv_cols_, ulysses_->v_input());
    }
  });
  maybe_freeze(Freeze::before_cp);
  if (ring_) {
    phases.time("cp_attention", [&] { ring_->step(ring::Mode::overlapped, true); });
    phases.time("cp_copy", [&] { device_.copy_on_device(out, ring_->o_buffer(), out_bytes); });
  } else {
    ulysses_->step(phases);
    phases.time("cp_copy",
                [&] { device_.copy_on_device(out, ulysses_->output_buffer(), out_bytes); });
  }
  maybe_freeze(Freeze::before_tp);
}

void CpAttention::backward(const void* d_out, void* d_qkv, PhaseTimer& phases) {
  const std::int64_t width = q_cols_ + 2 * kv_cols_;
  const std::size_t q_bytes = static_cast<std::size_t>(rows_ * q_cols_) * e_;
  if (ring_) {
    phases.time("bwd_cp_copy", [&] { device_.copy_on_device(ring_->do_buffer(), d_out, q_bytes); });
    phases.time("bwd_cp_attention", [&] { ring_->backward(ring::Mode::overlapped, true); });
    phases.time("bwd_cp_copy", [&] {
      const DType kv_t = ring_config(cfg_, engine_.grad_type()).grad_dtype;
      const auto* dkv = static_cast<const std::byte*>(ring_->dkv_buffer());
      to_layer(ring_->dq_buffer(), ring_->dq_type(), q_cols_, d_qkv, width, 0);
      to_layer(dkv, kv_t, kv_cols_, d_qkv, width, q_cols_);
      to_layer(dkv + static_cast<std::size_t>(rows_ * kv_cols_) * dtype_size(kv_t), kv_t, kv_cols_,
               d_qkv, width, q_cols_ + kv_cols_);
    });
    return;
  }
  phases.time("bwd_cp_copy", [&] { device_.copy_on_device(ulysses_->do_input(), d_out, q_bytes); });
  ulysses_->backward(phases);
  phases.time("bwd_cp_copy", [&] {
    to_layer(ulysses_->dq_buffer(), ulysses_->dq_a2a_type(), q_cols_, d_qkv, width, 0);
    to_layer(ulysses_->dk_buffer(), ulysses_->dkv_a2a_type(), kv_cols_, d_qkv, width, q_cols_);
    to_layer(ulysses_->dv_buffer(), ulysses_->dkv_a2a_type(), kv_cols_, d_qkv, width,
             q_cols_ + kv_cols_);
  });
}

std::vector<ring::RoundTimes> CpAttention::collect_times() {
  if (ring_) return ring_->collect_times();
  return {};
}

std::int64_t CpAttention::method_bytes() const {
  if (ring_)
    return ring_->method_bytes() + ring_->scratch_bytes() +
           (cfg_.backward() ? ring_->backward_method_bytes() + ring_->backward_scratch_bytes() : 0);
  const ring::RingAttention& r = ulysses_->ring_part();
  return r.method_bytes() + r.scratch_bytes() +
         (cfg_.backward() ? r.backward_method_bytes() + r.backward_scratch_bytes() : 0);
}

}  // namespace suite::mesh

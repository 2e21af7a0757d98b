#include "bench/ulysses/ulysses_attention.hpp"

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ulysses/head_transpose.hpp"
#include "common/device/typed_host.hpp"
#include "common/sim/sim.hpp"

namespace suite::ulysses {
namespace {

// An input tensor of `elems` values drawn by make(); under modeled compute a placeholder that
// holds none (common/sim/sim.hpp).
template <class Make>
Buffer upload(Device& device, std::int64_t elems, DType t, Make&& make) {
  if (sim::modeled()) return device.alloc(static_cast<std::size_t>(elems) * dtype_size(t));
  auto bytes = encode(make(), t);
  Buffer b = device.alloc(bytes.size());
  device.copy_from_host(b.data(), bytes.data(), bytes.size());
  return b;
}

}  // namespace

UlyssesAttention::UlyssesAttention(const UlyssesConfig& cfg, Device& device, Comm& group,
                                   Comm& ring, kernels::AttentionEngine& engine, std::uint64_t seed,
                                   bool generate_inputs)
    : cfg_(cfg), device_(device), group_(group), engine_(engine) {
  // With u = 1 the ring's own inputs are this rank's tokens; otherwise they arrive by all-to-all.
  ring_ = std::make_unique<ring::RingAttention>(cfg.ring_config(), device, ring, engine, seed,
                                                cfg.u == 1 && generate_inputs);
  const std::int64_t t = cfg.tokens_per_rank();
  const auto& group_positions = ring_->positions();  // the C tokens of this Ulysses group
  positions_.assign(group_positions.begin() + group.rank() * t,
                    group_positions.begin() + (group.rank() + 1) * t);
  if (cfg.u == 1) return;
  using ring::InputTensor;
  auto input = [&](InputTensor which, int heads) {
    const std::int64_t elems = t * cfg.batch * heads * cfg.head_dim;
    if (!generate_inputs)
      return device.alloc(static_cast<std::size_t>(elems) * dtype_size(cfg.dtype));
    return upload(device, elems, cfg.dtype, [&] {
      return ring::attention_input(seed, which, positions_, cfg.batch, heads, cfg.head_dim);
    });
  };
  q_ = input(InputTensor::q, cfg.heads);
  k_ = input(InputTensor::k, cfg.kv_heads);
  v_ = input(InputTensor::v, cfg.kv_heads);
  const std::size_t e = dtype_size(cfg.dtype);
  const std::size_t kv_packed =
      static_cast<std::size_t>(cfg.u * t * cfg.batch * cfg.kv_heads_per_rank() * cfg.head_dim) * e;
  q_send_ = device.alloc(q_.bytes());
  k_send_ = device.alloc(kv_packed);
  v_send_ = device.alloc(kv_packed);
  o_recv_ = device.alloc(q_.bytes());
  o_ = device.alloc(q_.bytes());
  if (cfg.backward()) {
    // dK/dV go back in the storage type when the kernel's accumulation type is theirs (a cast
    // like the forward's activations), else in the partial sums' own --grad-dtype.
    dkv_t_ = cfg.grad_dtype == engine.grad_type() ? cfg.dtype : cfg.grad_dtype;
    const std::size_t kv_t = dtype_size(dkv_t_);
    const std::size_t kv_rows = kv_packed / e;  // elements of one packed K (or V)
    do_ = input(InputTensor::d_o, cfg.heads);
    do_send_ = device.alloc(q_.bytes());
    if (engine.grad_type() != cfg.dtype) dq_cast_ = device.alloc(q_.bytes());
    if (dkv_t_ != cfg.grad_dtype) dkv_cast_ = device.alloc(2 * kv_rows * kv_t);
    dq_recv_ = device.alloc(q_.bytes());
    dk_recv_ = device.alloc(kv_rows * kv_t);
    dv_recv_ = device.alloc(kv_rows * kv_t);
    dq_ = device.alloc(q_.bytes());
    const std::size_t kv_unpacked = k_.bytes() / e * kv_t;
    dk_ = device.alloc(kv_unpacked);
    dv_ = device.alloc(kv_unpacked);
  }
  device.synchronize();
}

UlyssesAttention::Blocks UlyssesAttention::blocks() const {
  const std::int64_t rows = cfg_.tokens_per_rank() * cfg_.batch;
  return {{rows, cfg_.heads, cfg_.u, cfg_.heads_per_rank(), cfg_.head_dim},
          {rows, cfg_.kv_heads, cfg_.u, cfg_.kv_heads_per_rank(), cfg_.head_dim},
          static_cast<std::size_t>(rows * cfg_.heads_per_rank() * cfg_.head_dim),
          static_cast<std::size_t>(rows * cfg_.kv_heads_per_rank() * cfg_.head_dim)};
}

void UlyssesAttention::step(PhaseTimer& phases) {
  if (cfg_.u == 1) {
    phases.time("attention", [&] { ring_->step(ring::Mode::overlapped); });
    return;
  }
  const Blocks blk = blocks();
  const auto& [q_shape, kv_shape, q_block, kv_block] = blk;
  const std::size_t e = dtype_size(cfg_.dtype);
  phases.time("pack", [&] {
    head_pack(device_, q_shape, e, q_.data(), q_send_.data());
    head_pack(device_, kv_shape, e, k_.data(), k_send_.data());
    head_pack(device_, kv_shape, e, v_.data(), v_send_.data());
  });
  // Block i received comes from member i: its t tokens, so the receive buffers are the group's
  // C tokens in order, exactly as the ring attention holds them ([K | V] for K and V).
  auto* kv = static_cast<std::byte*>(ring_->kv_buffer());
  phases.time("a2a_q",
              [&] { group_.all_to_all(q_send_.data(), ring_->q_buffer(), q_block, cfg_.dtype); });
  phases.time("a2a_k", [&] { group_.all_to_all(k_send_.data(), kv, kv_block, cfg_.dtype); });
  phases.time("a2a_v", [&] {
    group_.all_to_all(v_send_.data(), kv + cfg_.u * kv_block * e, kv_block, cfg_.dtype);
  });
  phases.time("attention", [&] { ring_->step(ring::Mode::overlapped); });
  // The output's block j (member j's tokens, this rank's heads) goes back to member j.
  phases.time("a2a_out",
              [&] { group_.all_to_all(ring_->o_buffer(), o_recv_.data(), q_block, cfg_.dtype); });
  phases.time("unpack", [&] { head_unpack(device_, q_shape, e, o_recv_.data(), o_.data()); });
}

void UlyssesAttention::backward(PhaseTimer& phases) {
  if (cfg_.u == 1) {
    phases.time("bwd_attention", [&] { ring_->backward(ring::Mode::overlapped); });
    return;
  }
  const Blocks blk = blocks();
  const auto& [q_shape, kv_shape, q_block, kv_block] = blk;
  const std::size_t e = dtype_size(cfg_.dtype);
  const std::size_t kv_half = cfg_.u * kv_block;  // dK of the group's tokens, then dV
  phases.time("bwd_pack", [&] { head_pack(device_, q_shape, e, do_.data(), do_send_.data()); });
  phases.time("bwd_a2a_do",
              [&] { group_.all_to_all(do_send_.data(), ring_->do_buffer(), q_block, cfg_.dtype); });
  phases.time("bwd_attention", [&] { ring_->backward(ring::Mode::overlapped); });
  // Into the types they travel in (the kernel accumulates in its own type).
  const void* dq_src = ring_->dq_buffer();
  const void* dkv_src = ring_->dkv_buffer();
  phases.time("bwd_cast", [&] {
    if (dq_cast_.data()) {
      device_.fill_zero(dq_cast_.data(), dq_cast_.bytes());
      engine_.accumulate(dq_cast_.data(), cfg_.dtype, dq_src,
                         static_cast<std::int64_t>(cfg_.u * q_block));
      dq_src = dq_cast_.data();
    }
    if (dkv_cast_.data()) {
      device_.fill_zero(dkv_cast_.data(), dkv_cast_.bytes());
      engine_.accumulate(dkv_cast_.data(), dkv_t_, dkv_src, static_cast<std::int64_t>(2 * kv_half));
      dkv_src = dkv_cast_.data();
    }
  });
  const std::size_t kv_t = dtype_size(dkv_t_);
  // Block j of each (member j's tokens, this rank's heads) goes back to member j.
  phases.time("bwd_a2a_dq",
              [&] { group_.all_to_all(dq_src, dq_recv_.data(), q_block, cfg_.dtype); });
  phases.time("bwd_a2a_dk", [&] { group_.all_to_all(dkv_src, dk_recv_.data(), kv_block, dkv_t_); });
  phases.time("bwd_a2a_dv", [&] {
    group_.all_to_all(static_cast<const std::byte*>(dkv_src) + kv_half * kv_t, dv_recv_.data(),
                      kv_block, dkv_t_);
  });
  phases.time("bwd_unpack", [&] {
    head_unpack(device_, q_shape, e, dq_recv_.data(), dq_.data());
    head_unpack_sum(device_, kv_shape, dkv_t_, dk_recv_.data(), dk_.data());
    head_unpack_sum(device_, kv_shape, dkv_t_, dv_recv_.data(), dv_.data());
  });
}

void* UlyssesAttention::q_input() {
  return cfg_.u == 1 ? ring_->q_buffer() : q_.data();
}

void* UlyssesAttention::k_input() {
  return cfg_.u == 1 ? ring_->kv_buffer() : k_.data();
}

void* UlyssesAttention::v_input() {
  const std::int64_t k_bytes = ring_->positions().size() * cfg_.batch * cfg_.kv_heads *
                               cfg_.head_dim * dtype_size(cfg_.dtype);
  return cfg_.u == 1 ? static_cast<std::byte*>(ring_->kv_buffer()) + k_bytes : v_.data();
}

void* UlyssesAttention::do_input() {
  return cfg_.u == 1 ? ring_->do_buffer() : do_.data();
}

const void* UlyssesAttention::output_buffer() const {
  return cfg_.u == 1 ? ring_->o_buffer() : o_.data();
}

const void* UlyssesAttention::dq_buffer() const {
  return cfg_.u == 1 ? ring_->dq_buffer() : dq_.data();
}

const void* UlyssesAttention::dk_buffer() const {
  return cfg_.u == 1 ? ring_->dkv_buffer() : dk_.data();
}

const void* UlyssesAttention::dv_buffer() const {
  if (cfg_.u > 1) return dv_.data();
  const std::int64_t k_elems = static_cast<std::int64_t>(ring_->positions().size()) * cfg_.batch *
                               cfg_.kv_heads * cfg_.head_dim;
  return static_cast<const std::byte*>(ring_->dkv_buffer()) +
         k_elems * dtype_size(cfg_.ring_config().grad_dtype);
}

namespace {

std::vector<double> download(Device& device, const Buffer& b, DType t) {
  std::vector<std::byte> host(b.bytes());
  device.copy_to_host(host.data(), b.data(), host.size());
  return decode(host.data(), host.size() / dtype_size(t), t);
}

}  // namespace

std::vector<double> UlyssesAttention::dq() const {
  if (cfg_.u == 1) return ring_->dq();
  return download(device_, dq_, cfg_.dtype);
}

std::vector<double> UlyssesAttention::dkv() const {
  if (cfg_.u == 1) return ring_->dkv();
  auto out = download(device_, dk_, dkv_t_);
  const auto v = download(device_, dv_, dkv_t_);
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<double> UlyssesAttention::output() const {
  if (cfg_.u == 1) return ring_->output();
  std::vector<std::byte> host(o_.bytes());
  device_.copy_to_host(host.data(), o_.data(), host.size());
  return decode(host.data(), host.size() / dtype_size(cfg_.dtype), cfg_.dtype);
}

}  // namespace suite::ulysses

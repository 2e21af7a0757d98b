#include "bench/ulysses/ulysses_attention.hpp"

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ulysses/head_transpose.hpp"
#include "common/typed_host.hpp"

namespace suite::ulysses {
namespace {

Buffer upload(Device& device, const std::vector<double>& values, DType t) {
  auto bytes = encode(values, t);
  Buffer b = device.alloc(bytes.size());
  device.copy_from_host(b.data(), bytes.data(), bytes.size());
  return b;
}

}  // namespace

UlyssesAttention::UlyssesAttention(const UlyssesConfig& cfg, Device& device, Comm& group,
                                   Comm& ring, kernels::AttentionEngine& engine, std::uint64_t seed)
    : cfg_(cfg), device_(device), group_(group) {
  // With u = 1 the ring's own inputs are this rank's tokens; otherwise they arrive by all-to-all.
  ring_ = std::make_unique<ring::RingAttention>(cfg.ring_config(), device, ring, engine, seed,
                                                cfg.u == 1);
  const std::int64_t t = cfg.tokens_per_rank();
  const auto& group_positions = ring_->positions();  // the C tokens of this Ulysses group
  positions_.assign(group_positions.begin() + group.rank() * t,
                    group_positions.begin() + (group.rank() + 1) * t);
  if (cfg.u == 1) return;
  using ring::InputTensor;
  q_ = upload(
      device,
      ring::attention_input(seed, InputTensor::q, positions_, cfg.batch, cfg.heads, cfg.head_dim),
      cfg.dtype);
  k_ = upload(device,
              ring::attention_input(seed, InputTensor::k, positions_, cfg.batch, cfg.kv_heads,
                                    cfg.head_dim),
              cfg.dtype);
  v_ = upload(device,
              ring::attention_input(seed, InputTensor::v, positions_, cfg.batch, cfg.kv_heads,
                                    cfg.head_dim),
              cfg.dtype);
  const std::size_t e = dtype_size(cfg.dtype);
  const std::size_t kv_packed =
      static_cast<std::size_t>(cfg.u * t * cfg.batch * cfg.kv_heads_per_rank() * cfg.head_dim) * e;
  q_send_ = device.alloc(q_.bytes());
  k_send_ = device.alloc(kv_packed);
  v_send_ = device.alloc(kv_packed);
  o_recv_ = device.alloc(q_.bytes());
  o_ = device.alloc(q_.bytes());
  device.synchronize();
}

void UlyssesAttention::step(PhaseTimer& phases) {
  if (cfg_.u == 1) {
    phases.time("attention", [&] { ring_->step(ring::Mode::overlapped); });
    return;
  }
  const std::int64_t rows = cfg_.tokens_per_rank() * cfg_.batch;
  const kernels::HeadPackShape q_shape{rows, cfg_.heads, cfg_.u, cfg_.heads_per_rank(),
                                       cfg_.head_dim};
  const kernels::HeadPackShape kv_shape{rows, cfg_.kv_heads, cfg_.u, cfg_.kv_heads_per_rank(),
                                        cfg_.head_dim};
  const std::size_t e = dtype_size(cfg_.dtype);
  const auto q_block = static_cast<std::size_t>(rows * cfg_.heads_per_rank() * cfg_.head_dim);
  const auto kv_block = static_cast<std::size_t>(rows * cfg_.kv_heads_per_rank() * cfg_.head_dim);
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

std::vector<double> UlyssesAttention::output() const {
  if (cfg_.u == 1) return ring_->output();
  std::vector<std::byte> host(o_.bytes());
  device_.copy_to_host(host.data(), o_.data(), host.size());
  return decode(host.data(), host.size() / dtype_size(cfg_.dtype), cfg_.dtype);
}

}  // namespace suite::ulysses

// The distributed algorithm of Ulysses (and its hybrid with ring attention) on one rank: Q, K, V
// arrive sharded along the sequence; one all-to-all inside the Ulysses group switches to head
// sharding (all C = u t tokens of the group, a/u heads); attention runs over the group's tokens
// and, in a hybrid, against the other groups' K/V by ring attention; a second all-to-all on the
// output switches back to sequence sharding.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bench/ring_attention/ring_attention.hpp"
#include "bench/ulysses/ulysses_config.hpp"
#include "common/device/device.hpp"
#include "common/harness/phase_timer.hpp"
#include "common/transport/comm.hpp"
#include "kernels/a2a/head_pack.hpp"

namespace suite::ulysses {

class UlyssesAttention {
 public:
  // `group`: the u ranks of this Ulysses group; `ring`: this rank's ring across the groups
  // (ranks with the same index in every group of the context-parallel group; size n_c / u).
  // generate_inputs false: the caller writes q_input(), k_input(), v_input() (and do_input()
  // before a backward), e.g. a layer's QKV projection in the mesh benchmark.
  UlyssesAttention(const UlyssesConfig& cfg, Device& device, Comm& group, Comm& ring,
                   kernels::AttentionEngine& engine, std::uint64_t seed,
                   bool generate_inputs = true);

  // One forward step; phases: pack, a2a_q, a2a_k, a2a_v, attention (with the ring's
  // exchanges), a2a_out,
  // unpack (the pure ring, u = 1, has attention only).
  void step(PhaseTimer& phases);

  // One backward step (cfg.backward()) after a forward step (METHODS.md section 5): dO takes
  // the output's all-to-all in reverse (sequence to head sharding), the attention backward runs
  // on whole heads (a hybrid: the ring's backward across groups), and dQ, dK, dV go back (head
  // to sequence sharding; replicated K/V heads sum their replicas). Phases: bwd_pack,
  // bwd_a2a_do, bwd_attention, bwd_cast (gradients into the type they travel in), bwd_a2a_dq,
  // bwd_a2a_dk, bwd_a2a_dv, bwd_unpack (the pure ring: bwd_attention only).
  void backward(PhaseTimer& phases);

  // This rank's sequence-sharded inputs and output gradient [t, batch, heads (or kv_heads), d]
  // (u = 1: the ring's own buffers), and its output and gradients on the device (dq in
  // dq_a2a_type(), dk and dv in dkv_a2a_type(); u = 1: the ring's, whose types it says).
  void* q_input();
  void* k_input();
  void* v_input();
  void* do_input();
  const void* output_buffer() const;
  const void* dq_buffer() const;
  const void* dk_buffer() const;
  const void* dv_buffer() const;
  // This rank's output [t, batch, heads, d] in local token order, decoded to double.
  std::vector<double> output() const;
  // Backward: dQ [t, batch, heads, d] and [dK | dV] ([t, batch, kv_heads, d] each) of this
  // rank's tokens in local order, decoded.
  std::vector<double> dq() const;
  std::vector<double> dkv() const;
  // The element types dQ and dK/dV go back in: the storage type, or the partial sums' own
  // type where --grad-dtype differs from the kernel's accumulation type.
  DType dq_a2a_type() const { return cfg_.dtype; }
  DType dkv_a2a_type() const { return dkv_t_; }
  // The ring part (u = n_c: one rank's attention over the whole sequence).
  const ring::RingAttention& ring_part() const { return *ring_; }
  // Global positions of this rank's t tokens.
  const std::vector<std::int64_t>& positions() const { return positions_; }

 private:
  // The head packs around the all-to-alls (Q-like and K/V-like tensors) and the elements of
  // one block each all-to-all sends to one member.
  struct Blocks {
    kernels::HeadPackShape q_shape, kv_shape;
    std::size_t q_block, kv_block;
  };
  Blocks blocks() const;

  UlyssesConfig cfg_;
  Device& device_;
  Comm& group_;
  std::unique_ptr<ring::RingAttention> ring_;
  std::vector<std::int64_t> positions_;
  Buffer q_, k_, v_;                 // sequence-sharded inputs [t, b, heads, d]
  Buffer q_send_, k_send_, v_send_;  // packed for the all-to-all, one block per member
  Buffer o_recv_, o_;                // head-sharded output blocks back; unpacked output
  // Backward (u > 1): sequence-sharded dO and its packed blocks; the head-sharded gradients in
  // their all-to-all types; the blocks back; the sequence-sharded gradients.
  kernels::AttentionEngine& engine_;
  DType dkv_t_ = DType::fp32;
  Buffer do_, do_send_, dq_cast_, dkv_cast_, dq_recv_, dk_recv_, dv_recv_, dq_, dk_, dv_;
};

}  // namespace suite::ulysses

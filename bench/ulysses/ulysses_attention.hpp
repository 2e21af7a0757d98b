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
#include "common/comm.hpp"
#include "common/device.hpp"
#include "common/phase_timer.hpp"

namespace suite::ulysses {

class UlyssesAttention {
 public:
  // `group`: the u ranks of this Ulysses group; `ring`: this rank's ring across the groups
  // (ranks with the same index in every group of the context-parallel group; size n_c / u).
  UlyssesAttention(const UlyssesConfig& cfg, Device& device, Comm& group, Comm& ring,
                   kernels::AttentionEngine& engine, std::uint64_t seed);

  // One forward step; phases: pack, a2a_q, a2a_k, a2a_v, attention (with the ring's
  // exchanges), a2a_out,
  // unpack (the pure ring, u = 1, has attention only).
  void step(PhaseTimer& phases);

  // This rank's output [t, batch, heads, d] in local token order, decoded to double.
  std::vector<double> output() const;
  // Global positions of this rank's t tokens.
  const std::vector<std::int64_t>& positions() const { return positions_; }

 private:
  UlyssesConfig cfg_;
  Device& device_;
  Comm& group_;
  std::unique_ptr<ring::RingAttention> ring_;
  std::vector<std::int64_t> positions_;
  Buffer q_, k_, v_;                 // sequence-sharded inputs [t, b, heads, d]
  Buffer q_send_, k_send_, v_send_;  // packed for the all-to-all, one block per member
  Buffer o_recv_, o_;                // head-sharded output blocks back; unpacked output
};

}  // namespace suite::ulysses

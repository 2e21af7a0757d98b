// The distributed algorithm of ring attention on one rank (METHODS.md section 2): rank r's
// queries meet every K/V block as the blocks travel around the ring, each partial result is
// merged exactly into a running (o, lse), and the next block moves while this one is used.
// The same schedule runs three ways so F and W come from this very run: overlapped (the
// method), compute only (same rounds, same masks, no transfer) and transfer only. The
// group-cast variant keeps the rounds but moves only the rows each rank's queries see, straight
// from their owner (group_cast.hpp); the all-gather variant gathers every block at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/ring_attention/ring_config.hpp"
#include "common/device/device.hpp"
#include "common/transport/comm.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

enum class Mode { overlapped, compute_only, transfer_only };

// One step on this rank, per round: attention time, time blocked waiting for the round's
// exchange, and the exchange's own duration (from the transport).
struct RoundTimes {
  bool backward = false;  // a backward step: one more round, the dK/dV partial sums' home hop
  std::vector<double> compute_s, wait_s, transfer_s;
  int completed_during_compute = 0;  // exchanges seen complete while attention still ran
};

class RingAttention {
 public:
  // Allocates this rank's Q, K, V and, with generate_inputs, fills them from `seed` by global
  // position (otherwise the caller writes q_buffer() and kv_buffer(), e.g. Ulysses' all-to-all
  // in a hybrid). `comm` is the context-parallel ring (its size is cfg.n_c).
  RingAttention(const RingConfig& cfg, Device& device, Comm& comm, kernels::AttentionEngine& engine,
                std::uint64_t seed, bool generate_inputs = true);
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  // One forward step. With record_times, per-round timers are recorded for collect_times().
  void step(Mode mode, bool record_times = false);
  // One backward step (cfg.backward() only) after a forward step of the same mode
  // (METHODS.md section 5): Q, O, dO, lse and delta stay; K/V blocks travel as in the forward,
  // each block's dK/dV partial sums travel with it (one round behind, in cfg.grad_dtype) and
  // reach the block's owner after a final hop. dQ accumulates here. The all-gather variant
  // computes dK/dV of all s tokens and reduce-scatters them home. compute_only: the same rounds
  // without transfer; transfer_only: the exchanges alone.
  void backward(Mode mode, bool record_times = false);
  // Per-round times of the steps recorded since the last call, in order, forward and backward
  // steps as they ran (waits for their timers and the transport's exchange log, so call it
  // outside timed regions).
  std::vector<RoundTimes> collect_times();

  // This rank's Q [c, batch, heads, d], own K/V block [K | V] (each [c, batch, kv_heads, d])
  // and output [c, batch, heads, d], in local token order, on the device.
  void* q_buffer();
  void* kv_buffer();
  const void* o_buffer() const;

  // Rounds of the schedule: n_c for the ring and the group-cast (round k: the block of
  // ring_source(rank, k), which the group-cast receives only the needed rows of, or nothing), 1
  // for the all-gather variant.
  int rounds() const;
  // Rounds of the backward: the ring's n_c plus the home hop of the partial sums (n_c > 1); the
  // group-cast's last round adds the partial sums that arrived for this rank's rows.
  int backward_rounds() const;
  // Exact work of this rank per round: visible (query, key) pairs over all batch elements.
  std::vector<std::int64_t> work_pairs() const;
  // Per ring round (n_c of them, whatever the variant), this rank's (query segment, key
  // segment) block pairs of one sequence: skipped (no visible pair: not computed), masked
  // (some pairs hidden) and whole (every pair visible), counted per pair of the layout's runs
  // whatever --varlen-calls; and the attention kernel calls the forward makes (the backward
  // makes as many), which --varlen-calls block reduces.
  struct BlockCensus {
    std::vector<std::int64_t> skipped, masked, whole, calls;
  };
  BlockCensus block_census() const;
  // This rank's output [c, batch, heads, d] (local token order) and lse, one [heads, count]
  // block per (batch element, segment) at offset (batch * c + local_offset) * heads; decoded.
  std::vector<double> output() const;
  std::vector<double> lse() const;
  const std::vector<std::int64_t>& positions() const { return q_positions_; }
  // The runs of local tokens attention is computed on (the layout's segments when causal,
  // the whole block otherwise; under --varlen-calls block, ranges of adjacent runs, of which
  // only local_offset and count mean anything): they define the lse layout.
  const std::vector<Segment>& segments() const;
  // Bytes of the method's own buffers (Q, O, the current and the incoming K/V block: the six
  // blocks of METHODS.md; the all-gather variant's gathered K/V instead of the incoming one; the
  // group-cast's own K/V, its two slots of received rows and the copy of the rows it sends).
  std::int64_t method_bytes() const { return method_bytes_; }
  // Bytes of the rest: partial output and lse, positions, and this rank's own K/V (the ring
  // sends it in round 0; a training step keeps it for backward).
  std::int64_t scratch_bytes() const { return scratch_bytes_; }
  // Backward (cfg.backward()): this rank's output gradient dO [c, batch, heads, d] (drawn from
  // the seed by global position unless the caller writes it, as Ulysses does), dQ (same
  // layout, in dq_type()) and the final [dK | dV] of its own block (in cfg.grad_dtype; the
  // group-cast adds the partial sums the other ranks send home to its own contributions).
  void* do_buffer();
  const void* dq_buffer() const;
  const void* dkv_buffer() const;
  DType dq_type() const;
  std::vector<double> dq() const;
  std::vector<double> dkv() const;
  // Bytes of the backward's own buffers (Q, O, dO, dQ, the current and incoming K/V, and the
  // dK/dV partial sums: this round's contribution, the ones arriving and leaving) and of the
  // rest (delta; all-gather: dK/dV of all s tokens before packing).
  std::int64_t backward_method_bytes() const { return backward_method_bytes_; }
  std::int64_t backward_scratch_bytes() const { return backward_scratch_bytes_; }
  // Blocks whose mask the kernel could not express (vendor kernels fall back to the suite's).
  std::int64_t fallbacks() const;

  // The group-cast variant: whether its own schedule runs (false: the ring's, because no rank
  // would send or receive fewer bytes than the ring makes it; group_cast_fallback() says so)
  // and this rank's traffic of one forward: rows (tokens of K and V) received and sent, ranks
  // it receives from and sends to, and the batches its sources arrive in.
  bool group_cast_active() const;
  const std::string& group_cast_fallback() const;
  struct GroupCastCounts {
    std::int64_t rows_received = 0, rows_sent = 0;
    int sources = 0, targets = 0, batches = 0;
    // Bytes of the group-cast's own buffers (slots, staging; the backward's beyond them), as
    // the device's allocator counted them (0 where the ring's schedule runs).
    std::int64_t allocated_forward = 0, allocated_backward = 0;
    std::vector<std::int64_t> rows_by_round;  // received from the source of ring round k
  };
  GroupCastCounts group_cast_counts() const;

  // Estimated bytes the constructor allocates for cfg and holds in memory (to refuse a case
  // before allocating): under modeled compute only what stays real, the positions and the
  // buffers below the placeholder size (common/sim/sim.hpp).
  static std::int64_t estimate_bytes(const RingConfig& cfg);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<std::int64_t> q_positions_;
  std::int64_t method_bytes_ = 0, scratch_bytes_ = 0;
  std::int64_t backward_method_bytes_ = 0, backward_scratch_bytes_ = 0;
};

}  // namespace suite::ring

// The ring variant's forward schedule: N_c rounds, the K/V blocks passed around the ring.
#include "bench/ring_attention/ring_attention_impl.hpp"

namespace suite::ring {

// The ring: each round computes on the block at hand while the next arrives from the previous
// rank and the block leaves for the next, but in the last round.
void RingAttention::Impl::ring_forward(Mode mode, StepRecord* rec) {
  using C = Clock;
  const int R = cfg.n_c;  // rounds()
  const int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
  for (int k = 0; k < R; ++k) {
    // Round 0 uses (and sends) this rank's own block, which no pending work writes; later
    // rounds the block that arrived in the round before.
    const Buffer& cur = mode == Mode::compute_only || k == 0 ? kv_local : slot[k % 2];
    const Buffer& incoming = slot[(k + 1) % 2];
    const bool send = mode != Mode::compute_only && k < R - 1;  // no send in the last round
    if (send) {
      if (mode == Mode::transfer_only) start(rec, C::wait, k);
      comm.start_exchange(cur.data(), next, incoming.data(), prev,
                          static_cast<std::size_t>(cfg.kv_block_elems()), cfg.dtype);
      ++exchanges_logged;
    }
    if (mode != Mode::transfer_only) {
      start(rec, C::compute, k);
      ring_round(ring_source(rank, k, n), cur, cfg.c);
      stop(rec, C::compute, k);
    }
    if (send) {
      if (mode != Mode::transfer_only) start(rec, C::wait, k);
      comm.finish_exchange();
      stop(rec, C::wait, k);
    }
  }
}

}  // namespace suite::ring

// The backward of ring attention (METHODS.md section 5) on one rank. Per round k the rank
// holds block b_k = rank - k with its K/V (as in the forward) and computes its queries'
// contributions: dQ accumulates locally, the block's dK/dV go into `part`. Meanwhile the
// partial sums D_k of b_k arrive from the previous rank (the contributions of the ranks that
// held b_k before) and this rank's D_{k-1} leaves for the next; after the wait, D_k += part.
// After the last round D_{n-1} makes one more hop to its owner, and this rank receives its own
// block's complete dK/dV: K/V move n - 1 times, the partial sums n times.
#include <mpi.h>

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ring_attention/ring_attention_impl.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::ring {

std::pair<std::int64_t, std::int64_t> RingAttention::Impl::init_backward(
    std::uint64_t seed, bool generate_d_o, const std::vector<std::int64_t>& positions) {
  grad_t = engine.grad_type();
  const auto ge = static_cast<std::int64_t>(dtype_size(grad_t));
  const auto te = static_cast<std::int64_t>(cfg.grad_elem());
  const auto se = static_cast<std::int64_t>(e);
  const std::int64_t q_elems = cfg.c * cfg.q_row(), blk = cfg.kv_block_elems();
  auto alloc = [&](std::int64_t bytes) { return dev.alloc(static_cast<std::size_t>(bytes)); };
  if (generate_d_o) {
    const auto bytes = encode(
        attention_input(seed, InputTensor::d_o, positions, cfg.batch, cfg.heads, cfg.head_dim),
        cfg.dtype);
    d_o = alloc(static_cast<std::int64_t>(bytes.size()));
    dev.copy_from_host(d_o.data(), bytes.data(), bytes.size());
  } else {
    d_o = alloc(q_elems * se);
  }
  delta = alloc(static_cast<std::int64_t>(lse_run.bytes()));
  dq = alloc(q_elems * ge);
  const std::int64_t common = 3 * q_elems * se + q_elems * ge;  // Q, O, dO; dQ
  if (gc.on) {  // its own block's contributions (the ring's part), the rest: init_group_cast
    part = alloc(blk * ge);
    return {common + blk * se + blk * ge + gc.forward_bytes + gc.backward_bytes,
            static_cast<std::int64_t>(delta.bytes())};
  }
  if (cfg.variant != Variant::allgather) {
    part = alloc(blk * ge);
    travel[0] = alloc(blk * te);
    travel[1] = alloc(blk * te);
    // K/V: the block in use and the one arriving (the forward's two slots).
    return {common + 2 * blk * se + blk * ge + 2 * blk * te,
            static_cast<std::int64_t>(delta.bytes())};
  }
  dkv_all = alloc(blk * cfg.n_c * ge);  // [dK of all s tokens | dV of all s tokens]
  dkv_packed = alloc(blk * cfg.n_c * te);
  travel[0] = alloc(blk * te);
  // The gathered K/V of the forward, the packed partial sums of every block and the own result.
  return {common + cfg.n_c * blk * se + (cfg.n_c + 1) * blk * te,
          static_cast<std::int64_t>(delta.bytes() + dkv_all.bytes())};
}

void RingAttention::Impl::begin_backward() {
  for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
    for (const Segment& qs : my_segs()) {
      const std::int64_t q_off = qs.local_offset * cfg.q_row() + bi * cfg.heads * cfg.head_dim;
      const std::int64_t lse_off = (bi * cfg.c + qs.local_offset) * cfg.heads;
      engine.backward_delta(qs.count, cfg.heads, cfg.head_dim, at(o, q_off, e), at(d_o, q_off, e),
                            cfg.q_row(), at(delta, lse_off, lse_e));
    }
  dev.fill_zero(dq.data(), dq.bytes());
}

void RingAttention::Impl::backward_round(int src, const Buffer& block, const Buffer& dkv_part) {
  dev.fill_zero(dkv_part.data(), dkv_part.bytes());
  backward_pairs(src, block, cfg.c, dkv_part);
}

void RingAttention::Impl::backward_pairs(int src, const Buffer& block, std::int64_t v_rows,
                                         const Buffer& dkv_part) {
  sim::FlopBatch one_burst;  // modeled compute: the round's blocks as one injection
  const std::size_t ge = dtype_size(grad_t);
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  const std::int64_t v_half = v_rows * cfg.kv_row();  // where V (and dV) start
  for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
    for (const PairPlan& pl : plan(src)) {  // a pair with no visible pair contributes nothing
      const Segment &qs = my_segs()[pl.qi], &ks = pl.ks;
      const std::int64_t q_off = qs.local_offset * cfg.q_row() + bi * cfg.heads * cfg.head_dim;
      const std::int64_t lse_off = (bi * cfg.c + qs.local_offset) * cfg.heads;
      const std::int64_t k_off = pl.kv_row * cfg.kv_row() + bi * kv_head_row;
      engine.backward(params(qs.count, ks.count, cfg.kv_row(), pl.pairs), pl.mask, at(q, q_off, e),
                      at(block, k_off, e), at(block, v_half + k_off, e), at(o, q_off, e),
                      at(d_o, q_off, e), at(lse_run, lse_off, lse_e), at(delta, lse_off, lse_e),
                      q_pos.as<std::int64_t>() + qs.local_offset, key_positions(src, ks),
                      at(dq, q_off, ge), at(dkv_part, k_off, ge), at(dkv_part, v_half + k_off, ge));
    }
}

void RingAttention::Impl::backward_gathered_compute() {
  const std::size_t ge = dtype_size(grad_t), te = cfg.grad_elem();
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  const std::int64_t all_half = cfg.s() * cfg.kv_row();  // dV of all tokens after dK
  dev.fill_zero(dkv_all.data(), dkv_all.bytes());
  for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
    for (std::size_t qi = 0; qi < my_segs().size(); ++qi) {
      const Segment& qs = my_segs()[qi];
      const GatheredKeys& g = gathered_plan[qi];
      const std::int64_t q_off = qs.local_offset * cfg.q_row() + bi * cfg.heads * cfg.head_dim;
      const std::int64_t lse_off = (bi * cfg.c + qs.local_offset) * cfg.heads;
      const std::int64_t k_off = g.first * cfg.kv_row() + bi * kv_head_row;
      engine.backward(params(qs.count, g.count, cfg.kv_row(), g.pairs), g.mask, at(q, q_off, e),
                      at(k_all, k_off, e), at(v_all, k_off, e), at(o, q_off, e), at(d_o, q_off, e),
                      at(lse_run, lse_off, lse_e), at(delta, lse_off, lse_e),
                      q_pos.as<std::int64_t>() + qs.local_offset, gathered_key_positions(g.first),
                      at(dq, q_off, ge), at(dkv_all, k_off, ge), at(dkv_all, all_half + k_off, ge));
    }
  // Back to each owner's block layout [dK | dV] (the inverse of gather_all), in grad_dtype.
  dev.fill_zero(dkv_packed.data(), dkv_packed.bytes());
  const std::int64_t blk = cfg.kv_block_elems(), half = cfg.c * cfg.kv_row();
  for (int src = 0; src < n; ++src)
    for (const Segment& s : segs[src]) {
      const std::int64_t row =
          cfg.layout == Layout::striped ? src * cfg.c + s.local_offset : s.start;
      const std::int64_t dst = src * blk + s.local_offset * cfg.kv_row();
      const std::int64_t elems = s.count * cfg.kv_row();
      engine.accumulate(at(dkv_packed, dst, te), cfg.grad_dtype,
                        at(dkv_all, row * cfg.kv_row(), ge), elems);
      engine.accumulate(at(dkv_packed, dst + half, te), cfg.grad_dtype,
                        at(dkv_all, all_half + row * cfg.kv_row(), ge), elems);
    }
}

void RingAttention::backward(Mode mode, bool record_times) {
  Impl& m = *impl_;
  const RingConfig& cfg = m.cfg;
  SUITE_CHECK(cfg.backward(), "backward() on a ring set up for the forward only");
  using C = Impl::Clock;
  const int R = backward_rounds();
  Impl::StepRecord* rec = m.begin_step(record_times, R, /*backward=*/true);
  const std::size_t blk = static_cast<std::size_t>(cfg.kv_block_elems());

  if (m.gc.on) {
    m.group_cast_backward(mode, rec);
    m.end_step(rec);
    return;
  }
  if (cfg.variant == Variant::allgather) {
    if (mode != Mode::transfer_only) {
      Impl::start(rec, C::compute, 0);
      m.begin_backward();
      m.backward_gathered_compute();
      Impl::stop(rec, C::compute, 0);
    }
    if (mode != Mode::compute_only) {
      Impl::start(rec, C::wait, 0);
      m.comm.reduce_scatter(m.dkv_packed.data(), m.travel[0].data(), blk, cfg.grad_dtype);
      Impl::stop(rec, C::wait, 0);
    }
    m.own_dkv = 0;
    m.end_step(rec);
    return;
  }

  const int n = m.n, next = (m.rank + 1) % n, prev = (m.rank - 1 + n) % n;
  const bool moves = mode != Mode::compute_only && n > 1;
  for (int k = 0; k < n; ++k) {
    // As in the forward: round 0 uses this rank's own block, later rounds the one that arrived.
    const Buffer& cur = mode == Mode::compute_only || k == 0 ? m.kv_local : m.slot[k % 2];
    const Buffer& incoming = m.slot[(k + 1) % 2];
    // D_k: arrives into travel[k % 2] (k >= 1); compute only keeps one local sum.
    const Buffer& sums = mode == Mode::compute_only ? m.travel[0] : m.travel[k % 2];
    std::vector<Comm::ExchangePart> parts;
    if (moves && k < n - 1) parts.push_back({cur.data(), incoming.data(), blk, cfg.dtype});
    if (moves && k >= 1)
      parts.push_back({m.travel[(k + 1) % 2].data(), m.travel[k % 2].data(), blk, cfg.grad_dtype});
    if (!parts.empty()) {
      if (mode == Mode::transfer_only) Impl::start(rec, C::wait, k);
      m.comm.start_exchange(parts, next, prev);
      ++m.exchanges_logged;
    }
    if (mode != Mode::transfer_only) {
      Impl::start(rec, C::compute, k);
      if (k == 0) m.begin_backward();
      m.backward_round(ring_source(m.rank, k, n), cur, m.part);
      Impl::stop(rec, C::compute, k);
    }
    if (!parts.empty()) {
      if (mode != Mode::transfer_only) Impl::start(rec, C::wait, k);
      m.comm.finish_exchange();
      Impl::stop(rec, C::wait, k);
    }
    if (mode != Mode::transfer_only) {
      Impl::start(rec, C::accumulate, k);
      if (k == 0) m.dev.fill_zero(sums.data(), sums.bytes());  // D_0: no one held b_0 before
      m.engine.accumulate(sums.data(), cfg.grad_dtype, m.part.data(),
                          static_cast<std::int64_t>(blk));
      Impl::stop(rec, C::accumulate, k);
    }
  }
  m.own_dkv = 0;
  if (moves) {  // the home hop: D_{n-1} to its owner, this rank's own block from the previous
    Impl::start(rec, C::wait, n);
    m.comm.start_exchange(
        {{m.travel[(n - 1) % 2].data(), m.travel[n % 2].data(), blk, cfg.grad_dtype}}, next, prev);
    ++m.exchanges_logged;
    m.comm.finish_exchange();
    Impl::stop(rec, C::wait, n);
    m.own_dkv = n % 2;
  }
  m.end_step(rec);
}

int RingAttention::backward_rounds() const {
  const RingConfig& cfg = impl_->cfg;
  return cfg.variant != Variant::allgather && cfg.n_c > 1 ? cfg.n_c + 1 : 1;
}

void* RingAttention::do_buffer() {
  return impl_->d_o.data();
}
const void* RingAttention::dq_buffer() const {
  return impl_->dq.data();
}
const void* RingAttention::dkv_buffer() const {
  return impl_->gc.on ? impl_->gc.home.data() : impl_->travel[impl_->own_dkv].data();
}
DType RingAttention::dq_type() const {
  return impl_->grad_t;
}

std::vector<double> RingAttention::dq() const {
  const Impl& m = *impl_;
  std::vector<std::byte> host(m.dq.bytes());
  m.dev.copy_to_host(host.data(), m.dq.data(), host.size());
  return decode(host.data(), host.size() / dtype_size(m.grad_t), m.grad_t);
}

std::vector<double> RingAttention::dkv() const {
  const Impl& m = *impl_;
  const Buffer& b = m.gc.on ? m.gc.home : m.travel[m.own_dkv];
  std::vector<std::byte> host(b.bytes());
  m.dev.copy_to_host(host.data(), b.data(), host.size());
  return decode(host.data(), host.size() / m.cfg.grad_elem(), m.cfg.grad_dtype);
}

}  // namespace suite::ring

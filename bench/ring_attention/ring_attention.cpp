#include "bench/ring_attention/ring_attention.hpp"

#include "bench/ring_attention/ring_attention_impl.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "bench/ring_attention/attention_inputs.hpp"
#include "common/device/typed_host.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::ring {
namespace {

DType lse_type(std::size_t lse_elem) {
  return lse_elem == sizeof(float) ? DType::fp32 : DType::fp64;
}

// Positions of the keys once the all-gather variant has laid the gathered K/V out: global
// order for contiguous and zig-zag (so a causal query range sees a prefix), rank order for
// striped (its mask is only expressible by positions anyway).
std::vector<std::int64_t> gathered_positions(const RingConfig& cfg) {
  std::vector<std::int64_t> pos;
  pos.reserve(static_cast<std::size_t>(cfg.s()));
  if (cfg.layout != Layout::striped) {
    for (std::int64_t i = 0; i < cfg.s(); ++i)
      pos.push_back(i);
    return pos;
  }
  for (int r = 0; r < cfg.n_c; ++r) {
    auto p = row_positions(cfg, r);
    pos.insert(pos.end(), p.begin(), p.end());
  }
  return pos;
}

}  // namespace

// Attention of (batch bi, query segment qi) against ck keys at k / v (row stride ld_kv),
// written into the running result or merged into it.
void RingAttention::Impl::attend(std::int64_t bi, std::size_t qi, const std::byte* k,
                                 const std::byte* v, std::int64_t ld_kv, std::int64_t ck,
                                 const std::int64_t* kpos, BlockMask mask, std::int64_t pairs) {
  const Segment& qs = my_segs()[qi];
  const AttentionParams p = params(qs.count, ck, ld_kv, pairs);
  const std::int64_t q_off = qs.local_offset * cfg.q_row() + bi * cfg.heads * cfg.head_dim;
  const std::int64_t lse_off = (bi * cfg.c + qs.local_offset) * cfg.heads;
  const std::byte* qp = at(q, q_off, e);
  const std::int64_t* qpos = q_pos.as<std::int64_t>() + qs.local_offset;
  std::byte* run_o = at(o, q_off, e);
  std::byte* run_lse = at(lse_run, lse_off, lse_e);
  char& has = written[static_cast<std::size_t>(bi) * my_segs().size() + qi];
  if (!has) {
    engine.forward(p, mask, qp, k, v, qpos, kpos, run_o, run_lse);
    has = 1;
    return;
  }
  std::byte* part_o = at(o_part, q_off, e);
  engine.forward(p, mask, qp, k, v, qpos, kpos, part_o, lse_part.data());
  engine.merge(qs.count, cfg.heads, cfg.head_dim, run_o, p.ld_o, run_lse, part_o, p.ld_o,
               lse_part.data(), run_o, p.ld_o, run_lse);
}

// This rank's queries against the keys of rank `src` held in `block`.
void RingAttention::Impl::ring_round(int src, const Buffer& block, std::int64_t v_rows) {
  sim::FlopBatch one_burst;  // modeled compute: the round's blocks as one injection
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
    for (const PairPlan& pl : plan(src)) {
      const Segment& ks = pl.ks;
      const std::int64_t k_off = pl.kv_row * cfg.kv_row() + bi * kv_head_row;
      const std::byte* k = at(block, k_off, e);
      const std::byte* v = at(block, v_rows * cfg.kv_row() + k_off, e);
      attend(bi, pl.qi, k, v, cfg.kv_row(), ks.count, key_positions(src, ks), pl.mask, pl.pairs);
    }
}

void RingAttention::Impl::plan_schedule() {
  const PackedDocuments* docs = cfg.documents();
  query_runs = my_segs().size();
  plans.assign(static_cast<std::size_t>(n), {});
  census.assign(static_cast<std::size_t>(n), {});
  gc_reads.assign(cfg.variant == Variant::groupcast ? static_cast<std::size_t>(n) : 0, {});
  for (int src = 0; src < n; ++src) {
    const std::vector<Segment> keys = compute_runs(src);
    // Runs of consecutive positions, sorted by their first one (then by their last too: a
    // rank's runs do not overlap), so a query run finds the key runs that can share a document
    // with it by binary search; strided runs (striped: one per rank) are all candidates.
    std::vector<std::size_t> order(keys.size());
    for (std::size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    bool consecutive = true;
    for (const Segment& ks : keys)
      consecutive = consecutive && (ks.stride == 1 || ks.count <= 1);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return keys[a].first() < keys[b].first(); });
    auto& row = plans[static_cast<std::size_t>(src)];
    for (std::size_t qi = 0; qi < my_segs().size(); ++qi) {
      const Segment& qs = my_segs()[qi];
      if (qs.count == 0) continue;
      auto from = order.begin(), to = order.end();
      if (consecutive) {
        const auto [lo, hi] = key_window(qs, cfg.causal, docs, cfg.s());
        from = std::partition_point(order.begin(), order.end(),
                                    [&](std::size_t k) { return keys[k].last() < lo; });
        to = std::partition_point(from, order.end(),
                                  [&](std::size_t k) { return keys[k].first() <= hi; });
      }
      const std::size_t first = row.size();
      for (auto it = from; it != to; ++it) {
        const Segment& ks = keys[*it];
        if (ks.count == 0) continue;
        const std::int64_t pairs = visible_pairs(qs, ks, cfg.causal, docs);
        if (pairs == 0) continue;
        row.push_back({qi, ks, *classify_pair(qs, ks, cfg.causal, docs), pairs, ks.local_offset});
      }
      std::sort(row.begin() + static_cast<std::ptrdiff_t>(first), row.end(),
                [](const PairPlan& a, const PairPlan& b) {
                  return a.ks.local_offset < b.ks.local_offset;
                });
    }
    SourceCensus& tally = census[static_cast<std::size_t>(src)];
    tally.key_runs = static_cast<std::int64_t>(keys.size());
    for (const PairPlan& pl : row) {
      tally.pairs += pl.pairs;
      ++(pl.pairs == my_segs()[pl.qi].count * pl.ks.count ? tally.whole : tally.masked);
    }
    // Group-cast: each pair reads only the keys its query run sees, the rows a source sends.
    if (cfg.variant == Variant::groupcast && src != rank)
      for (PairPlan& pl : row) {
        const Segment& qs = my_segs()[pl.qi];
        pl.ks = visible_key_run(qs, pl.ks, cfg.causal, docs, cfg.s());
        pl.kv_row = pl.ks.local_offset;
        pl.mask = *classify_pair(qs, pl.ks, cfg.causal, docs);
        gc_reads[static_cast<std::size_t>(src)].push_back({pl.kv_row, pl.ks.count});
      }
    // A new vector moved in: assign() or clear() would keep row's capacity, every pair's.
    if (sim::modeled() && !row.empty())
      row = std::vector<PairPlan>{{row[0].qi, row[0].ks, row[0].mask, tally.pairs, row[0].kv_row}};
  }
  if (cfg.block_calls) merge_into_block_calls();
  gathered_plan.clear();
  if (cfg.variant == Variant::allgather)
    for (const Segment& qs : my_segs())
      gathered_plan.push_back(gathered_keys(qs));
}

void RingAttention::Impl::merge_into_block_calls() {
  SUITE_CHECK(cfg.variant == Variant::ring, "block calls: only the ring variant makes them");
  std::vector<std::size_t> range_of(qsegs.size());
  std::vector<Segment> ranges;
  for (std::size_t i = 0; i < qsegs.size(); ++i) {
    const Segment& s = qsegs[i];
    SUITE_CHECK(
        ranges.empty() || s.local_offset >= ranges.back().local_offset + ranges.back().count,
        "block calls: the query runs are not in local order");
    if (ranges.empty() || ranges.back().local_offset + ranges.back().count != s.local_offset)
      ranges.push_back({s.local_offset, s.start, 1, 0});
    ranges.back().count += s.count;
    range_of[i] = ranges.size() - 1;
  }
  // A source's entries come by query run, so those of one range are consecutive.
  for (std::vector<PairPlan>& row : plans) {
    std::vector<PairPlan> merged;
    for (const PairPlan& pl : row) {
      const std::int64_t k0 = pl.ks.local_offset, k1 = k0 + pl.ks.count;
      if (merged.empty() || merged.back().qi != range_of[pl.qi]) {
        merged.push_back(
            {range_of[pl.qi], Segment{k0, 0, 1, k1 - k0}, BlockMask::positions, 0, k0});
      } else {
        Segment& keys = merged.back().ks;
        const std::int64_t end = std::max(keys.local_offset + keys.count, k1);
        keys.local_offset = std::min(keys.local_offset, k0);
        keys.count = end - keys.local_offset;
        merged.back().kv_row = keys.local_offset;
      }
      merged.back().pairs += pl.pairs;
    }
    row = std::move(merged);
  }
  qsegs = std::move(ranges);
}

RingAttention::RingAttention(const RingConfig& cfg, Device& device, Comm& comm,
                             kernels::AttentionEngine& engine, std::uint64_t seed,
                             bool generate_inputs)
    : impl_(std::make_unique<Impl>(cfg, device, comm, engine)) {
  Impl& m = *impl_;
  SUITE_CHECK(comm.size() == cfg.n_c, "the ring's group size differs from n_c");
  for (int r = 0; r < cfg.n_c && cfg.variant == Variant::allgather; ++r)
    m.segs.push_back(token_segments(cfg, r));
  m.qsegs = m.compute_runs(m.rank);
  q_positions_ = row_positions(cfg, m.rank);
  m.plan_schedule();
  if (cfg.variant == Variant::groupcast) m.plan_group_cast();
  m.written.assign(static_cast<std::size_t>(cfg.batch) * m.qsegs.size(), 0);

  auto upload = [&](const std::vector<double>& values) {
    Buffer b = device.alloc(values.size() * m.e);
    auto bytes = encode(values, cfg.dtype);
    device.copy_from_host(b.data(), bytes.data(), bytes.size());
    return b;
  };
  // Modeled compute reads no values (common/sim/sim.hpp): the tensors stay placeholders.
  generate_inputs = generate_inputs && !sim::modeled();
  auto input = [&](InputTensor which, int heads) {
    if (generate_inputs)
      return upload(attention_input(seed, which, q_positions_, cfg.batch, heads, cfg.head_dim));
    return device.alloc(static_cast<std::size_t>(cfg.c * cfg.batch * heads * cfg.head_dim) * m.e);
  };
  // Positions as the mask reads them: tagged with their documents where there are some.
  auto upload_pos = [&](const std::vector<std::int64_t>& plain) {
    sim::KeepData keep;  // the mask reads them, modeled compute too
    const std::vector<std::int64_t> pos = cfg.docs ? cfg.docs->tagged(plain) : plain;
    Buffer b =
        device.alloc(static_cast<std::size_t>(pos_bytes(static_cast<std::int64_t>(pos.size()))));
    device.copy_from_host(b.data(), pos.data(), b.bytes());
    return b;
  };
  // Modeled compute injects each block's FLOPs from its planned visible pairs, so it keeps no
  // key positions (N_c blocks of c each would grow with the ring).
  const bool key_positions = !sim::modeled();

  const std::int64_t q_bytes = cfg.c * cfg.q_row() * static_cast<std::int64_t>(m.e);
  m.q = input(InputTensor::q, cfg.heads);
  m.o = device.alloc(static_cast<std::size_t>(q_bytes));
  if (sim::modeled()) {
    m.kv_local = device.alloc(static_cast<std::size_t>(m.block_bytes()));
  } else {
    auto k =
        attention_input(seed, InputTensor::k, q_positions_, cfg.batch, cfg.kv_heads, cfg.head_dim);
    auto v =
        attention_input(seed, InputTensor::v, q_positions_, cfg.batch, cfg.kv_heads, cfg.head_dim);
    k.insert(k.end(), v.begin(), v.end());  // one block: [K | V]
    m.kv_local = upload(k);
  }
  m.q_pos = upload_pos(q_positions_);
  for (int r = 0; r < cfg.n_c && key_positions; ++r)
    m.k_pos.push_back(upload_pos(row_positions(cfg, r)));
  const std::int64_t lse_run_bytes =
      cfg.batch * cfg.heads * cfg.c * static_cast<std::int64_t>(m.lse_e);
  m.lse_run = device.alloc(static_cast<std::size_t>(lse_run_bytes));
  std::int64_t longest = 0;
  for (const auto& s : m.qsegs)
    longest = std::max(longest, s.count);
  m.lse_part = device.alloc(
      static_cast<std::size_t>(cfg.heads * longest * static_cast<std::int64_t>(m.lse_e)));

  const std::int64_t pos_total = pos_bytes(cfg.c) * (1 + cfg.n_c);
  if (m.gc.on) {
    // Q, O, its own K/V (sent from the staging copy, used in round 0) and what arrives: the
    // two slots; the staging copy of the rows the other ranks need.
    m.o_part = device.alloc(static_cast<std::size_t>(q_bytes));
    m.init_group_cast(cfg.backward());
    method_bytes_ = 2 * q_bytes + m.block_bytes() + m.gc.forward_bytes;
    scratch_bytes_ =
        q_bytes + lse_run_bytes + static_cast<std::int64_t>(m.lse_part.bytes()) + pos_total;
  } else if (cfg.variant != Variant::allgather) {
    m.slot[0] = device.alloc(static_cast<std::size_t>(m.block_bytes()));
    m.slot[1] = device.alloc(static_cast<std::size_t>(m.block_bytes()));
    m.o_part = device.alloc(static_cast<std::size_t>(q_bytes));
    method_bytes_ = 2 * q_bytes + 2 * m.block_bytes();
    scratch_bytes_ = q_bytes + lse_run_bytes + static_cast<std::int64_t>(m.lse_part.bytes()) +
                     m.block_bytes() + pos_total;
  } else {
    m.gathered = device.alloc(static_cast<std::size_t>(m.block_bytes() * cfg.n_c));
    const std::int64_t half = m.block_bytes() * cfg.n_c / 2;  // K (or V) of all s tokens
    m.k_all = device.alloc(static_cast<std::size_t>(half));
    m.v_all = device.alloc(static_cast<std::size_t>(half));
    if (key_positions) m.all_pos = upload_pos(gathered_positions(cfg));
    // The method keeps Q, O, its own K/V and the N_c gathered blocks; laying them out again in
    // token order (k_all, v_all) is this implementation's scratch.
    method_bytes_ = 2 * q_bytes + m.block_bytes() + m.block_bytes() * cfg.n_c;
    scratch_bytes_ = m.block_bytes() * cfg.n_c + lse_run_bytes +
                     static_cast<std::int64_t>(m.lse_part.bytes()) + pos_total + pos_bytes(cfg.s());
  }
  if (cfg.backward())
    std::tie(backward_method_bytes_, backward_scratch_bytes_) =
        m.init_backward(seed, generate_inputs, q_positions_);
  if (cfg.poll_progress && m.gc.on)
    engine.set_progress_hook([&m] { m.poll_group_cast(); });
  else if (cfg.poll_progress)
    engine.set_progress_hook([&comm] { comm.progress(); });
  device.synchronize();
}

RingAttention::~RingAttention() {
  impl_->engine.set_progress_hook({});
  // The last step's sends: every rank that needs them received them before finishing it.
  if (impl_->gc.on) impl_->finish_group_cast_sends();
}

void* RingAttention::q_buffer() {
  return impl_->q.data();
}
void* RingAttention::kv_buffer() {
  return impl_->kv_local.data();
}
const void* RingAttention::o_buffer() const {
  return impl_->o.data();
}

const std::vector<Segment>& RingAttention::segments() const {
  return impl_->qsegs;
}

int RingAttention::rounds() const {
  return impl_->cfg.variant == Variant::allgather ? 1 : impl_->cfg.n_c;
}

bool RingAttention::group_cast_active() const {
  return impl_->gc.on;
}

const std::string& RingAttention::group_cast_fallback() const {
  return impl_->gc.fallback_note;
}

RingAttention::GroupCastCounts RingAttention::group_cast_counts() const {
  const Impl& m = *impl_;
  GroupCastCounts out;
  out.rows_by_round.assign(static_cast<std::size_t>(m.n), 0);
  for (const auto& s : m.gc.sources) {
    out.rows_received += s.count, ++out.sources;
    out.rows_by_round[static_cast<std::size_t>(s.round)] = s.count;
  }
  for (const auto& t : m.gc.targets)
    out.rows_sent += t.count, ++out.targets;
  out.batches = static_cast<int>(m.gc.batches.size());
  out.allocated_forward = m.gc.forward_allocated;
  out.allocated_backward = m.gc.backward_allocated;
  return out;
}

std::int64_t RingAttention::estimate_bytes(const RingConfig& cfg) {
  const std::int64_t e = static_cast<std::int64_t>(cfg.elem());
  const std::int64_t q_bytes = cfg.c * cfg.q_row() * e;
  const std::int64_t block = cfg.kv_block_elems() * e;
  const std::int64_t lse = 2 * cfg.batch * cfg.heads * cfg.c * 8;  // upper bound: 8-byte lse
  const std::int64_t pos = pos_bytes(cfg.c) * (2 + 2 * cfg.n_c);
  // The backward (8-byte gradients as an upper bound): dO, dQ, delta, and three dK/dV blocks
  // (all-gather: every block twice, and the own one).
  const std::int64_t grad_block = cfg.kv_block_elems() * 8;
  const std::int64_t bwd =
      !cfg.backward() ? 0
                      : q_bytes + cfg.c * cfg.q_row() * 8 + lse / 2 +
                            (cfg.variant != Variant::allgather ? 3 * grad_block
                                                               : (2 * cfg.n_c + 1) * grad_block);
  // The group-cast is planned later: the ring's figure (its slots hold at most the ring's).
  const std::int64_t all = cfg.variant != Variant::allgather
                               ? 3 * q_bytes + 3 * block + lse + pos + bwd
                               : 2 * q_bytes + block + 2 * block * cfg.n_c + lse + pos + bwd;
  if (!sim::modeled()) return all;
  // Modeled: the own positions (no key positions: each block's visible pairs are planned)
  // and the few buffers below the placeholder size (log-sum-exp partials).
  return pos_bytes(cfg.c) +
         std::min<std::int64_t>(all, 4 * static_cast<std::int64_t>(sim::kPlaceholderMinBytes));
}

std::int64_t RingAttention::fallbacks() const {
  return impl_->engine.fallbacks();
}

void RingAttention::step(Mode mode, bool record_times) {
  Impl& m = *impl_;
  const RingConfig& cfg = m.cfg;
  const int R = rounds();
  std::fill(m.written.begin(), m.written.end(), 0);
  Impl::StepRecord* rec = m.begin_step(record_times, R, /*backward=*/false);

  if (m.gc.on) {
    m.group_cast_forward(mode, rec);
  } else if (cfg.variant == Variant::allgather) {
    m.allgather_forward(mode, rec);
  } else {
    m.ring_forward(mode, rec);
  }
  m.end_step(rec);
}

std::vector<RoundTimes> RingAttention::collect_times() {
  Impl& m = *impl_;
  const auto log = m.comm.exchange_log();
  using C = Impl::Clock;
  std::vector<RoundTimes> out;
  for (std::size_t i = 0; i < m.recorded; ++i) {
    Impl::StepRecord& rec = m.records[i];
    const int R = rec.rounds;
    auto seconds = [&](C c, int k) {
      const auto ci = static_cast<int>(c);
      const auto ki = static_cast<std::size_t>(k);
      return rec.ran[ci][ki] ? rec.timers[ci][ki]->seconds() : 0.0;
    };
    RoundTimes t;
    t.backward = rec.backward;
    t.compute_s.assign(R, 0.0);
    t.wait_s.assign(R, 0.0);
    t.transfer_s.assign(R, 0.0);
    for (int k = 0; k < R; ++k) {
      t.compute_s[k] = seconds(C::compute, k) + seconds(C::accumulate, k);
      t.wait_s[k] = seconds(C::wait, k);
    }
    // Exchange j of a step is the one that round j started (the backward's home hop: round R-1).
    for (std::size_t j = 0; j < rec.exchanges && rec.first_exchange + j < log.size(); ++j) {
      t.transfer_s[j] = log[rec.first_exchange + j].seconds;
      t.completed_during_compute += log[rec.first_exchange + j].completed_in_progress ? 1 : 0;
    }
    if (m.cfg.variant == Variant::allgather && rec.ran[static_cast<int>(C::wait)][0])
      t.transfer_s[0] = t.wait_s[0];
    out.push_back(std::move(t));
  }
  m.recorded = 0;
  m.comm.clear_exchange_log();
  m.exchanges_logged = 0;
  return out;
}

std::vector<std::int64_t> RingAttention::work_pairs() const {
  const Impl& m = *impl_;
  std::vector<std::int64_t> out(static_cast<std::size_t>(rounds()), 0);
  for (int k = 0; k < m.n; ++k) {
    const int src = ring_source(m.rank, k, m.n);
    out[m.cfg.variant == Variant::allgather ? 0 : k] +=
        m.census[static_cast<std::size_t>(src)].pairs * m.cfg.batch;
  }
  return out;
}

RingAttention::BlockCensus RingAttention::block_census() const {
  const Impl& m = *impl_;
  BlockCensus out;
  for (int k = 0; k < m.n; ++k) {
    const int src = ring_source(m.rank, k, m.n);
    const Impl::SourceCensus& tally = m.census[static_cast<std::size_t>(src)];
    // Every (query segment, key run) pair without an entry is skipped.
    const auto pairs = static_cast<std::int64_t>(m.query_runs) * tally.key_runs;
    out.skipped.push_back(pairs - tally.masked - tally.whole);
    out.masked.push_back(tally.masked);
    out.whole.push_back(tally.whole);
    // The ring (and the group-cast) calls the kernel once per plan entry; the all-gather
    // variant once per query segment, all in its one round.
    const bool ring = m.cfg.variant != Variant::allgather;
    out.calls.push_back(ring     ? static_cast<std::int64_t>(m.plan(src).size())
                        : k == 0 ? static_cast<std::int64_t>(m.my_segs().size())
                                 : 0);
  }
  return out;
}

std::vector<double> RingAttention::output() const {
  const Impl& m = *impl_;
  std::vector<std::byte> host(m.o.bytes());
  m.dev.copy_to_host(host.data(), m.o.data(), host.size());
  return decode(host.data(), host.size() / m.e, m.cfg.dtype);
}

std::vector<double> RingAttention::lse() const {
  const Impl& m = *impl_;
  std::vector<std::byte> host(m.lse_run.bytes());
  m.dev.copy_to_host(host.data(), m.lse_run.data(), host.size());
  return decode(host.data(), host.size() / m.lse_e, lse_type(m.lse_e));
}

}  // namespace suite::ring

#include "bench/ring_attention/ring_attention.hpp"

#include <cmath>
#include <cstring>

#include "bench/ring_attention/attention_inputs.hpp"
#include "common/errors.hpp"
#include "common/typed_host.hpp"

namespace suite::ring {
namespace {

using kernels::AttentionParams;
using kernels::BlockMask;

DType lse_type(std::size_t lse_elem) {
  return lse_elem == sizeof(float) ? DType::fp32 : DType::fp64;
}

std::int64_t pos_bytes(std::int64_t n) {
  return n * static_cast<std::int64_t>(sizeof(std::int64_t));
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
    auto p = rank_positions(cfg.layout, r, cfg.n_c, cfg.c);
    pos.insert(pos.end(), p.begin(), p.end());
  }
  return pos;
}

}  // namespace

struct RingAttention::Impl {
  Impl(const RingConfig& c, Device& d, Comm& cm, kernels::AttentionEngine& en)
      : cfg(c),
        dev(d),
        comm(cm),
        engine(en),
        rank(cm.rank()),
        n(cm.size()),
        e(c.elem()),
        lse_e(en.lse_elem_size()) {}

  RingConfig cfg;
  Device& dev;
  Comm& comm;
  kernels::AttentionEngine& engine;
  int rank, n;
  std::size_t e, lse_e;

  Buffer q, o, o_part, lse_run, lse_part;
  Buffer slot[2];       // ring: from round 1 on, the block in use and the one arriving
  Buffer kv_local;      // this rank's own K/V: used and sent in round 0, kept for backward
  Buffer gathered;      // all-gather: [n_c][K | V] as the collective delivers it
  Buffer k_all, v_all;  // all-gather: K and V of all s tokens, laid out for one attention
  Buffer q_pos;
  std::vector<Buffer> k_pos;                // per source rank
  Buffer all_pos;                           // all-gather: positions of k_all / v_all rows
  std::vector<std::vector<Segment>> segs;   // per rank: the layout's runs of positions
  std::vector<std::vector<Segment>> csegs;  // per rank: the runs attention is computed on
  std::vector<char> written;  // per (batch, query segment): running result holds a partial
  // One recorded step's per-round timers, resolved only by collect_times(), so no host
  // synchronisation sits inside a timed step. Reused after each collection.
  struct StepRecord {
    std::vector<std::unique_ptr<IntervalTimer>> compute, wait;
    std::vector<char> computed, waited;
    std::size_t first_exchange = 0, exchanges = 0;
  };
  std::vector<StepRecord> records;
  std::size_t recorded = 0;          // records in use since the last collection
  std::size_t exchanges_logged = 0;  // exchanges in the transport's log since it was cleared

  StepRecord& next_record(int rounds) {
    if (recorded == records.size()) {
      StepRecord r;
      for (int k = 0; k < rounds; ++k) {
        r.compute.push_back(dev.make_timer());
        r.wait.push_back(dev.make_timer());
      }
      records.push_back(std::move(r));
    }
    StepRecord& r = records[recorded++];
    r.computed.assign(static_cast<std::size_t>(rounds), 0);
    r.waited.assign(static_cast<std::size_t>(rounds), 0);
    r.first_exchange = exchanges_logged;
    r.exchanges = 0;
    return r;
  }

  std::byte* at(const Buffer& b, std::int64_t elems, std::size_t elem_size) const {
    return b.as<std::byte>() + elems * static_cast<std::int64_t>(elem_size);
  }
  std::int64_t block_bytes() const { return cfg.kv_block_elems() * static_cast<std::int64_t>(e); }
  const std::vector<Segment>& my_segs() const { return csegs[rank]; }

  AttentionParams params(std::int64_t cq, std::int64_t ck, std::int64_t ld_kv) const {
    AttentionParams p =
        kernels::make_attention_params(cq, ck, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal);
    p.ld_q = p.ld_o = cfg.q_row();
    p.ld_k = p.ld_v = ld_kv;
    return p;
  }

  // Attention of (batch bi, query segment qi) against ck keys at k / v (row stride ld_kv),
  // written into the running result or merged into it.
  void attend(std::int64_t bi, std::size_t qi, const std::byte* k, const std::byte* v,
              std::int64_t ld_kv, std::int64_t ck, const std::int64_t* kpos, BlockMask mask) {
    const Segment& qs = my_segs()[qi];
    const AttentionParams p = params(qs.count, ck, ld_kv);
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

  // One ring round: this rank's queries against the block of rank `src` held in `block`.
  void ring_round(int src, const Buffer& block) {
    const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
    for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
      for (std::size_t qi = 0; qi < my_segs().size(); ++qi)
        for (const Segment& ks : csegs[src]) {
          auto mask = classify_pair(my_segs()[qi], ks, cfg.causal);
          if (!mask) continue;  // fully masked: skipped (the block still travels on)
          const std::int64_t k_off = ks.local_offset * cfg.kv_row() + bi * kv_head_row;
          const std::byte* k = at(block, k_off, e);
          const std::byte* v = at(block, cfg.c * cfg.kv_row() + k_off, e);
          attend(bi, qi, k, v, cfg.kv_row(), ks.count,
                 k_pos[src].as<std::int64_t>() + ks.local_offset, *mask);
        }
  }

  // All-gather variant, communication part: gather every K/V block, then lay K and V out
  // as one array each (global order, or rank order for striped).
  void gather_all() {
    comm.all_gather(kv_local.data(), gathered.data(),
                    static_cast<std::size_t>(cfg.kv_block_elems()), cfg.dtype);
    const std::int64_t row = cfg.kv_row() * static_cast<std::int64_t>(e);
    for (int src = 0; src < n; ++src) {
      const std::byte* blk = gathered.as<std::byte>() + src * block_bytes();
      for (const Segment& s : segs[src]) {
        const std::int64_t dst_row =
            cfg.layout == Layout::striped ? src * cfg.c + s.local_offset : s.start;
        const std::int64_t rows = s.count;
        dev.copy_on_device(k_all.as<std::byte>() + dst_row * row, blk + s.local_offset * row,
                           static_cast<std::size_t>(rows * row));
        dev.copy_on_device(v_all.as<std::byte>() + dst_row * row,
                           blk + cfg.c * row + s.local_offset * row,
                           static_cast<std::size_t>(rows * row));
      }
    }
  }

  // All-gather variant, compute part: one attention per query segment over the keys it needs.
  void attend_gathered() {
    const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
    for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
      for (std::size_t qi = 0; qi < my_segs().size(); ++qi) {
        const Segment& qs = my_segs()[qi];
        std::int64_t ck = cfg.s();
        BlockMask mask = BlockMask::full;
        if (cfg.causal && cfg.layout == Layout::striped) {
          mask = BlockMask::positions;
        } else if (cfg.causal) {
          ck = qs.last() + 1;  // a contiguous query range sees a prefix of the sequence
          mask = BlockMask::causal_bottom_right;
        }
        const std::byte* k = at(k_all, bi * kv_head_row, e);
        const std::byte* v = at(v_all, bi * kv_head_row, e);
        attend(bi, qi, k, v, cfg.kv_row(), ck, all_pos.as<std::int64_t>(), mask);
      }
  }
};

RingAttention::RingAttention(const RingConfig& cfg, Device& device, Comm& comm,
                             kernels::AttentionEngine& engine, std::uint64_t seed,
                             bool generate_inputs)
    : impl_(std::make_unique<Impl>(cfg, device, comm, engine)) {
  Impl& m = *impl_;
  SUITE_CHECK(comm.size() == cfg.n_c, "the ring's group size differs from n_c");
  for (int r = 0; r < cfg.n_c; ++r) {
    m.segs.push_back(rank_segments(cfg.layout, r, cfg.n_c, cfg.c));
    // Without a causal mask every pair is visible: one call per block, whatever the layout.
    m.csegs.push_back(cfg.causal ? m.segs.back() : std::vector<Segment>{{0, 0, 1, cfg.c}});
  }
  q_segments_ = m.csegs[m.rank];
  q_positions_ = rank_positions(cfg.layout, m.rank, cfg.n_c, cfg.c);
  m.written.assign(static_cast<std::size_t>(cfg.batch) * q_segments_.size(), 0);

  auto upload = [&](const std::vector<double>& values) {
    Buffer b = device.alloc(values.size() * m.e);
    auto bytes = encode(values, cfg.dtype);
    device.copy_from_host(b.data(), bytes.data(), bytes.size());
    return b;
  };
  auto input = [&](InputTensor which, int heads) {
    if (generate_inputs)
      return upload(attention_input(seed, which, q_positions_, cfg.batch, heads, cfg.head_dim));
    return device.alloc(static_cast<std::size_t>(cfg.c * cfg.batch * heads * cfg.head_dim) * m.e);
  };
  auto upload_pos = [&](const std::vector<std::int64_t>& pos) {
    Buffer b =
        device.alloc(static_cast<std::size_t>(pos_bytes(static_cast<std::int64_t>(pos.size()))));
    device.copy_from_host(b.data(), pos.data(), b.bytes());
    return b;
  };

  const std::int64_t q_bytes = cfg.c * cfg.q_row() * static_cast<std::int64_t>(m.e);
  m.q = input(InputTensor::q, cfg.heads);
  m.o = device.alloc(static_cast<std::size_t>(q_bytes));
  {
    auto k =
        attention_input(seed, InputTensor::k, q_positions_, cfg.batch, cfg.kv_heads, cfg.head_dim);
    auto v =
        attention_input(seed, InputTensor::v, q_positions_, cfg.batch, cfg.kv_heads, cfg.head_dim);
    k.insert(k.end(), v.begin(), v.end());  // one block: [K | V]
    m.kv_local = upload(k);
  }
  m.q_pos = upload_pos(q_positions_);
  for (int r = 0; r < cfg.n_c; ++r)
    m.k_pos.push_back(upload_pos(rank_positions(cfg.layout, r, cfg.n_c, cfg.c)));
  const std::int64_t lse_run_bytes =
      cfg.batch * cfg.heads * cfg.c * static_cast<std::int64_t>(m.lse_e);
  m.lse_run = device.alloc(static_cast<std::size_t>(lse_run_bytes));
  std::int64_t longest = 0;
  for (const auto& s : q_segments_)
    longest = std::max(longest, s.count);
  m.lse_part = device.alloc(
      static_cast<std::size_t>(cfg.heads * longest * static_cast<std::int64_t>(m.lse_e)));

  const std::int64_t pos_total = pos_bytes(cfg.c) * (1 + cfg.n_c);
  if (cfg.variant == Variant::ring) {
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
    m.all_pos = upload_pos(gathered_positions(cfg));
    // The method keeps Q, O, its own K/V and the N_c gathered blocks; laying them out again in
    // token order (k_all, v_all) is this implementation's scratch.
    method_bytes_ = 2 * q_bytes + m.block_bytes() + m.block_bytes() * cfg.n_c;
    scratch_bytes_ = m.block_bytes() * cfg.n_c + lse_run_bytes +
                     static_cast<std::int64_t>(m.lse_part.bytes()) + pos_total + pos_bytes(cfg.s());
  }
  if (cfg.poll_progress) engine.set_progress_hook([&comm] { comm.progress(); });
  device.synchronize();
}

RingAttention::~RingAttention() {
  impl_->engine.set_progress_hook({});
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

int RingAttention::rounds() const {
  return impl_->cfg.variant == Variant::ring ? impl_->cfg.n_c : 1;
}

std::int64_t RingAttention::estimate_bytes(const RingConfig& cfg) {
  const std::int64_t e = static_cast<std::int64_t>(cfg.elem());
  const std::int64_t q_bytes = cfg.c * cfg.q_row() * e;
  const std::int64_t block = cfg.kv_block_elems() * e;
  const std::int64_t lse = 2 * cfg.batch * cfg.heads * cfg.c * 8;  // upper bound: 8-byte lse
  const std::int64_t pos = pos_bytes(cfg.c) * (2 + 2 * cfg.n_c);
  if (cfg.variant == Variant::ring) return 3 * q_bytes + 3 * block + lse + pos;
  return 2 * q_bytes + block + 2 * block * cfg.n_c + lse + pos;
}

std::int64_t RingAttention::fallbacks() const {
  return impl_->engine.fallbacks();
}

void RingAttention::step(Mode mode, bool record_times) {
  Impl& m = *impl_;
  const RingConfig& cfg = m.cfg;
  const int R = rounds();
  std::fill(m.written.begin(), m.written.end(), 0);
  if (m.recorded == 0) {  // nothing waits to be collected: the transport's log starts afresh
    m.comm.clear_exchange_log();
    m.exchanges_logged = 0;
  }
  Impl::StepRecord* rec = record_times ? &m.next_record(R) : nullptr;
  // Timers of this step's round k, or none when not recording.
  auto compute_timer = [&](int k) { return rec ? rec->compute[k].get() : nullptr; };
  auto wait_timer = [&](int k) { return rec ? rec->wait[k].get() : nullptr; };
  auto start = [](IntervalTimer* t) {
    if (t) t->start();
  };
  auto stop = [](IntervalTimer* t, std::vector<char>* ran, int k) {
    if (!t) return;
    t->stop();
    (*ran)[k] = 1;
  };

  if (cfg.variant == Variant::allgather) {
    if (mode != Mode::compute_only) {
      start(wait_timer(0));
      m.gather_all();
      if (rec) stop(wait_timer(0), &rec->waited, 0);
    }
    if (mode != Mode::transfer_only) {
      start(compute_timer(0));
      m.attend_gathered();
      if (rec) stop(compute_timer(0), &rec->computed, 0);
    }
  } else {
    const int next = (m.rank + 1) % m.n, prev = (m.rank - 1 + m.n) % m.n;
    for (int k = 0; k < R; ++k) {
      // Round 0 uses (and sends) this rank's own block, which no pending work writes; later
      // rounds the block that arrived in the round before.
      const Buffer& cur = mode == Mode::compute_only || k == 0 ? m.kv_local : m.slot[k % 2];
      const Buffer& incoming = m.slot[(k + 1) % 2];
      const bool send = mode != Mode::compute_only && k < R - 1;  // no send in the last round
      if (send) {
        if (mode == Mode::transfer_only) start(wait_timer(k));
        m.comm.start_exchange(cur.data(), next, incoming.data(), prev,
                              static_cast<std::size_t>(cfg.kv_block_elems()), cfg.dtype);
        ++m.exchanges_logged;
      }
      if (mode != Mode::transfer_only) {
        start(compute_timer(k));
        m.ring_round(ring_source(m.rank, k, m.n), cur);
        if (rec) stop(compute_timer(k), &rec->computed, k);
      }
      if (send) {
        if (mode != Mode::transfer_only) start(wait_timer(k));
        m.comm.finish_exchange();
        if (rec) stop(wait_timer(k), &rec->waited, k);
      }
    }
  }
  if (rec) rec->exchanges = m.exchanges_logged - rec->first_exchange;
}

std::vector<RoundTimes> RingAttention::collect_times() {
  Impl& m = *impl_;
  const int R = rounds();
  const auto log = m.comm.exchange_log();
  std::vector<RoundTimes> out;
  for (std::size_t i = 0; i < m.recorded; ++i) {
    Impl::StepRecord& rec = m.records[i];
    RoundTimes t;
    t.compute_s.assign(R, 0.0);
    t.wait_s.assign(R, 0.0);
    t.transfer_s.assign(R, 0.0);
    for (int k = 0; k < R; ++k) {
      if (rec.computed[k]) t.compute_s[k] = rec.compute[k]->seconds();
      if (rec.waited[k]) t.wait_s[k] = rec.wait[k]->seconds();
    }
    // Exchange j of a step is the one that round j started.
    for (std::size_t j = 0; j < rec.exchanges && rec.first_exchange + j < log.size(); ++j) {
      t.transfer_s[j] = log[rec.first_exchange + j].seconds;
      t.completed_during_compute += log[rec.first_exchange + j].completed_in_progress ? 1 : 0;
    }
    if (m.cfg.variant == Variant::allgather && rec.waited[0]) t.transfer_s[0] = t.wait_s[0];
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
    std::int64_t pairs = 0;
    for (const Segment& qs : m.my_segs())
      for (const Segment& ks : m.csegs[src])
        pairs += visible_pairs(qs, ks, m.cfg.causal);
    out[m.cfg.variant == Variant::ring ? k : 0] += pairs * m.cfg.batch;
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

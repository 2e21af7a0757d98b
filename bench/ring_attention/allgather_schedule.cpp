// The all-gather variant's forward schedule: every K/V block gathered first, then one attention
// per query segment over the keys it needs.
#include "bench/ring_attention/ring_attention_impl.hpp"

namespace suite::ring {

// All-gather variant, communication part: gather every K/V block, then lay K and V out
// as one array each (global order, or rank order for striped).
void RingAttention::Impl::gather_all() {
  comm.all_gather(kv_local.data(), gathered.data(), static_cast<std::size_t>(cfg.kv_block_elems()),
                  cfg.dtype);
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
void RingAttention::Impl::attend_gathered() {
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
    for (std::size_t qi = 0; qi < my_segs().size(); ++qi) {
      const GatheredKeys& g = gathered_plan[qi];
      const std::byte* k = at(k_all, g.first * cfg.kv_row() + bi * kv_head_row, e);
      const std::byte* v = at(v_all, g.first * cfg.kv_row() + bi * kv_head_row, e);
      attend(bi, qi, k, v, cfg.kv_row(), g.count, gathered_key_positions(g.first), g.mask, g.pairs);
    }
}

RingAttention::Impl::GatheredKeys RingAttention::Impl::gathered_keys(const Segment& qs) const {
  GatheredKeys g;
  for (int src = 0; src < n; ++src)
    for (const Segment& ks : segs[static_cast<std::size_t>(src)])
      g.pairs += visible_pairs(qs, ks, cfg.causal, cfg.documents());
  const PackedDocuments* docs = cfg.documents();
  if (cfg.layout == Layout::striped) {  // rank order: only positions describe the mask
    g.count = cfg.s();
    g.mask = cfg.causal || docs ? BlockMask::positions : BlockMask::full;
    return g;
  }
  if (docs == nullptr) {
    g.count = cfg.causal ? qs.last() + 1 : cfg.s();
    g.mask = cfg.causal ? BlockMask::causal_bottom_right : BlockMask::full;
    return g;
  }
  // Global order: the keys from the start of the segment's first document to its last query
  // (causal) or to the end of its last document.
  const std::int64_t d0 = docs->document_of(qs.first()), d1 = docs->document_of(qs.last());
  g.first = docs->start(d0);
  g.count = (cfg.causal ? qs.last() + 1 : docs->end(d1)) - g.first;
  g.mask = d0 != d1     ? BlockMask::positions
           : cfg.causal ? BlockMask::causal_bottom_right
                        : BlockMask::full;
  return g;
}

void RingAttention::Impl::allgather_forward(Mode mode, StepRecord* rec) {
  using C = Clock;
  if (mode != Mode::compute_only) {
    start(rec, C::wait, 0);
    gather_all();
    stop(rec, C::wait, 0);
  }
  if (mode != Mode::transfer_only) {
    start(rec, C::compute, 0);
    attend_gathered();
    stop(rec, C::compute, 0);
  }
}

}  // namespace suite::ring

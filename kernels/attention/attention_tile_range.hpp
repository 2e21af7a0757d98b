// Which keys of a key tile the CPU kernels must compute for a query tile: only keys of the
// tile's documents and, under a causal mask, with position <= the tile's largest query
// position can be visible, so the GEMMs run over the span from the first to the last such key
// (any layout: positions need not be sorted), and element masking is needed only where some
// query of the tile cannot see a key in that span.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/attention/attention_index.hpp"

namespace suite::kernels::cpu {

struct KeySpan {
  std::int64_t begin = 0, end = 0;  // [begin, end) within the block's keys
  bool needs_mask = false;          // some pair inside the span is hidden
  bool empty() const { return end <= begin; }
};

inline KeySpan key_span(bool causal, const std::int64_t* k_pos, std::int64_t j0, std::int64_t j1,
                        std::int64_t q_min, std::int64_t q_max) {
  KeySpan s{j1, j0, false};
  for (std::int64_t j = j0; j < j1; ++j) {
    if (!key_maybe_visible(causal, q_min, q_max, k_pos[j])) continue;
    s.begin = std::min(s.begin, j);
    s.end = j + 1;
  }
  for (std::int64_t j = s.begin; j < s.end; ++j)
    s.needs_mask = s.needs_mask || !key_seen_by_all(causal, q_min, q_max, k_pos[j]);
  return s;
}

// Smallest and largest position among q_pos[i0, i1).
inline std::pair<std::int64_t, std::int64_t> position_range(const std::int64_t* pos,
                                                            std::int64_t i0, std::int64_t i1) {
  const auto [lo, hi] = std::minmax_element(pos + i0, pos + i1);
  return {*lo, *hi};
}

// The end of the rows [r0, r1) of q_pos + i0 that lie in row r0's document: r1 where all do.
inline std::int64_t same_document_end(const std::int64_t* q_pos, std::int64_t i0, std::int64_t r0,
                                      std::int64_t r1) {
  const std::int64_t doc = document_of(q_pos[i0 + r0]);
  std::int64_t r = r0 + 1;
  while (r < r1 && document_of(q_pos[i0 + r]) == doc)
    ++r;
  return r;
}

// The end of the keys at the start of `span` that every query in [q_min, q_max] sees: they
// need no mask. Taken in whole multiples of `least` keys, the rest left to the masked calls:
// fewer than `least` are not worth a call of their own (a causal diagonal's first key is seen
// by all its rows: a call of one key over every row), and the one key past a multiple that a
// causal diagonal adds (its rows' first query sees itself) made those GEMMs 257, 129 or 65 keys
// wide, the QK^T GEMM 5 to 13% slower than at 256, 128 or 64 (OpenBLAS 0.3.21, SkylakeX).
inline std::int64_t seen_by_all_end(bool causal, const std::int64_t* k_pos, const KeySpan& span,
                                    std::int64_t q_min, std::int64_t q_max, std::int64_t least) {
  std::int64_t j = span.begin;
  while (j < span.end && key_seen_by_all(causal, q_min, q_max, k_pos[j]))
    ++j;
  return span.begin + (j - span.begin) / least * least;
}

// Rows [r0, r1) of one document (of q_pos + i0) against the keys [j0, j1) they may see: the
// leading keys all of them see in one unmasked call (if `piece` or more), then the rest (a
// causal diagonal) in pieces of at most `piece` rows, each over its own span, so the diagonal
// wastes at most piece x piece / 2 pairs per piece.
template <class Fn>
void for_each_diagonal_piece(bool causal, const std::int64_t* q_pos, std::int64_t i0,
                             std::int64_t r0, std::int64_t r1, const std::int64_t* k_pos,
                             std::int64_t j0, std::int64_t j1, std::int64_t piece, Fn& fn) {
  const auto [lo, hi] = position_range(q_pos, i0 + r0, i0 + r1);
  const KeySpan span = key_span(causal, k_pos, j0, j1, lo, hi);
  if (span.empty()) return;
  if (!span.needs_mask || r1 - r0 <= piece) {
    fn(r0, r1, span);
    return;
  }
  const std::int64_t split = seen_by_all_end(causal, k_pos, span, lo, hi, piece);
  if (split > span.begin) fn(r0, r1, KeySpan{span.begin, split, false});
  for (std::int64_t p0 = r0; p0 < r1; p0 += piece) {
    const std::int64_t p1 = std::min(p0 + piece, r1);
    const auto [plo, phi] = position_range(q_pos, i0 + p0, i0 + p1);
    const KeySpan part = key_span(causal, k_pos, split, span.end, plo, phi);
    if (!part.empty()) fn(p0, p1, part);
  }
}

// Calls fn(r0, r1, span) for the query rows [i0 + r0, i0 + r1) of a query tile and keys
// [span.begin, span.end) of the key tile [j0, j1) they may see. Where nothing is masked, once
// for the whole tile (large GEMMs). Where a causal diagonal or a document boundary crosses the
// tile: once for the leading keys every query of the tile sees (unmasked, all rows; if `piece`
// or more), then per sub-tile of at most `sub` rows of one document over the rest
// (for_each_diagonal_piece: unmasked where all its rows see the keys, a causal diagonal in
// pieces of `piece` rows), so no call computes one document's queries against another's keys
// and a diagonal wastes at most piece x piece / 2 pairs per piece instead of rows x rows / 2.
template <class Fn>
void for_each_row_block(bool causal, const std::int64_t* q_pos, std::int64_t i0, std::int64_t i1,
                        const std::int64_t* k_pos, std::int64_t j0, std::int64_t j1,
                        std::int64_t sub, std::int64_t piece, Fn&& fn) {
  const auto [q_min, q_max] = position_range(q_pos, i0, i1);
  const KeySpan span = key_span(causal, k_pos, j0, j1, q_min, q_max);
  const std::int64_t rows = i1 - i0;
  if (span.empty()) return;
  if (!span.needs_mask) {
    fn(std::int64_t{0}, rows, span);
    return;
  }
  const std::int64_t split = seen_by_all_end(causal, k_pos, span, q_min, q_max, piece);
  if (split > span.begin) fn(std::int64_t{0}, rows, KeySpan{span.begin, split, false});
  for (std::int64_t r0 = 0, r1 = 0; r0 < rows; r0 = r1) {
    r1 = same_document_end(q_pos, i0, r0, std::min(r0 + sub, rows));
    for_each_diagonal_piece(causal, q_pos, i0, r0, r1, k_pos, split, span.end, piece, fn);
  }
}

// A CPU kernel's tiling: query tiles of q rows against key tiles of k keys; at most sub_q rows
// per call where a causal diagonal or a document boundary crosses a query tile, and piece_q on a
// causal diagonal inside such a sub-tile (for_each_row_block).
struct TileSizes {
  std::int64_t q, k, sub_q, piece_q;
};

// The calls of for_each_row_block for every (query tile, key tile) of a cq x ck block, found
// once per kernel call: they depend on the positions only, not on the head, and finding them
// scans the key tile once per sub-tile and piece. Repeated for each head, on ring blocks of
// packed lognormal:256:1 documents (256-row query tiles over several documents) that scan cost
// about a fifth of the compute. The first thing a kernel derives from its parameters: it
// validates them (std::invalid_argument).
class TileCalls {
 public:
  TileCalls(const AttentionParams& p, const std::int64_t* q_pos, const std::int64_t* k_pos,
            const TileSizes& t)
      : tile_rows_(std::min(t.q, p.cq)), tile_cols_(std::min(t.k, p.ck)) {
    validate_attention(p);
    for (std::int64_t qt = 0; qt < tile_count(p.cq, t.q); ++qt) {
      for (std::int64_t kt = 0; kt < tile_count(p.ck, t.k); ++kt)
        for_each_row_block(p.causal, q_pos, qt * t.q, tile_end(qt, t.q, p.cq), k_pos, kt * t.k,
                           tile_end(kt, t.k, p.ck), t.sub_q, t.piece_q,
                           [&](std::int64_t r0, std::int64_t r1, const KeySpan& span) {
                             calls_.push_back({r0, r1, span});
                           });
      first_.push_back(calls_.size());
    }
  }

  // The block's largest tile, which sizes the kernel's scratch: a ring round's small block
  // allocates (and zeroes) what it uses, not a full tile each call.
  std::int64_t tile_rows() const { return tile_rows_; }
  std::int64_t tile_cols() const { return tile_cols_; }

  // Calls fn(r0, r1, span) for query tile qt against every key tile, in order.
  template <class Fn>
  void run(std::int64_t qt, Fn&& fn) const {
    const auto t = static_cast<std::size_t>(qt);
    for (std::size_t i = first_[t]; i < first_[t + 1]; ++i)
      fn(calls_[i].r0, calls_[i].r1, calls_[i].span);
  }

 private:
  struct Call {
    std::int64_t r0, r1;  // rows of the query tile
    KeySpan span;         // keys of the block
  };
  std::int64_t tile_rows_, tile_cols_;
  std::vector<Call> calls_;
  std::vector<std::size_t> first_{0};  // [query tile]: its first call; then one past the last
};

}  // namespace suite::kernels::cpu

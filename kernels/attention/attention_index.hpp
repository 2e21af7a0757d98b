// Shape of one attention block (queries of one block against keys/values of one block: the
// ring-attention building block) and the index arithmetic every implementation shares.
// The helpers are __host__ __device__ so the CPU tests exercise the very code the GPU runs.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

// q: [cq tokens, heads, head_dim]; k, v: [ck tokens, kv_heads, head_dim]; o like q;
// lse: [heads, cq]. Token t, head h, feature c of q lives at q[t * ld_q + h * head_dim + c]:
// the ld_* are row strides in elements, so one batch element of an [s, b, h] tensor is
// addressed by offsetting the pointer by b_idx * h and using ld = b * h.
struct AttentionParams {
  std::int64_t cq = 0;  // query tokens in this block
  std::int64_t ck = 0;  // key/value tokens in this block
  int heads = 0;        // a: query heads
  int kv_heads = 0;     // n_kv: K/V heads; heads % kv_heads == 0 (GQA group g = heads/kv_heads)
  int head_dim = 0;     // d: 64 or 128
  std::int64_t ld_q = 0, ld_k = 0, ld_v = 0, ld_o = 0;
  bool causal = false;         // key visible iff k_pos <= q_pos (and in the query's document)
  double softmax_scale = 0.0;  // usually 1 / sqrt(head_dim)
  // The block's exact visible pairs when the caller has counted them (-1: not given). Only
  // modeled compute reads it: it injects the block's FLOPs without reading positions.
  std::int64_t known_visible_pairs = -1;
};

// Dense strides and scale 1/sqrt(d): the common case.
inline AttentionParams make_attention_params(std::int64_t cq, std::int64_t ck, int heads,
                                             int kv_heads, int head_dim, bool causal) {
  AttentionParams p;
  p.cq = cq;
  p.ck = ck;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.ld_q = p.ld_o = static_cast<std::int64_t>(heads) * head_dim;
  p.ld_k = p.ld_v = static_cast<std::int64_t>(kv_heads) * head_dim;
  p.causal = causal;
  p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  return p;
}

// The K/V head that query head h reads: GQA groups of heads / kv_heads query heads share one.
inline int kv_head_of(const AttentionParams& p, int h) {
  return h / (p.heads / p.kv_heads);
}

// Throws std::invalid_argument with a message naming the offending field.
inline void validate_attention(const AttentionParams& p) {
  auto fail = [](const std::string& why) { throw std::invalid_argument("attention: " + why); };
  if (p.head_dim != 64 && p.head_dim != 128) {
    fail("head_dim " + std::to_string(p.head_dim) + " unsupported (supported: 64, 128)");
  }
  if (p.cq < 0 || p.ck < 0) fail("negative token count");
  if (p.heads <= 0 || p.kv_heads <= 0) fail("head counts must be positive");
  if (p.heads % p.kv_heads != 0) {
    fail("heads (" + std::to_string(p.heads) + ") must be a multiple of kv_heads (" +
         std::to_string(p.kv_heads) + ")");
  }
  const std::int64_t q_row = static_cast<std::int64_t>(p.heads) * p.head_dim;
  const std::int64_t kv_row = static_cast<std::int64_t>(p.kv_heads) * p.head_dim;
  if (p.ld_q < q_row || p.ld_o < q_row) fail("ld_q/ld_o smaller than heads * head_dim");
  if (p.ld_k < kv_row || p.ld_v < kv_row) fail("ld_k/ld_v smaller than kv_heads * head_dim");
  if (!(p.softmax_scale > 0.0)) fail("softmax_scale must be positive");
}

// Packed documents (varlen): a position may carry its document's index in its high bits,
// tagged = doc << kDocShift | position, so that one int64 per token tells every kernel both
// where the token is and which document it belongs to. Documents are numbered in sequence
// order, so tagged positions sort as the plain ones do; untagged positions are document 0.
constexpr int kDocShift = 40;  // 2^40 tokens per sequence, 2^23 documents
SUITE_HD inline std::int64_t tag_document(std::int64_t doc, std::int64_t pos) {
  return (doc << kDocShift) | pos;
}
SUITE_HD inline std::int64_t document_of(std::int64_t tagged) {
  return tagged >> kDocShift;
}
SUITE_HD inline std::int64_t untagged_position(std::int64_t tagged) {
  return tagged & ((std::int64_t{1} << kDocShift) - 1);
}
// The document of a slot that holds no token (a padded document's padding): no query has it, so
// a kernel given such a key among others never sees it, causal or not. Such a slot must never be
// a query (it would see the other padding, and visible_window would overflow).
constexpr std::int64_t kNoDocument = (std::int64_t{1} << (63 - kDocShift)) - 1;

// The keys a query at (tagged) q_pos sees are those with lo <= k_pos <= hi: its own document,
// up to itself when causal. One range test per key, as vectorised row masks want it.
struct KeyWindow {
  std::int64_t lo, hi;
};
SUITE_HD inline KeyWindow visible_window(bool causal, std::int64_t q_pos) {
  const std::int64_t doc = document_of(q_pos);
  const std::int64_t lo = tag_document(doc, 0);
  return {lo, causal ? q_pos : tag_document(doc + 1, 0) - 1};
}

// Visibility on global positions, so any layout (contiguous, zig-zag, striped) works: same
// document and, when causal, k_pos <= q_pos.
SUITE_HD inline bool key_visible(bool causal, std::int64_t q_pos, std::int64_t k_pos) {
  return document_of(q_pos) == document_of(k_pos) && (!causal || k_pos <= q_pos);
}

// May key k_pos be visible to some query with position in [q_min, q_max]? (Conservative: true
// can still mean no.) Does every query in [q_min, q_max] see it? (Exact where true.)
SUITE_HD inline bool key_maybe_visible(bool causal, std::int64_t q_min, std::int64_t q_max,
                                       std::int64_t k_pos) {
  const std::int64_t dk = document_of(k_pos);
  return dk >= document_of(q_min) && dk <= document_of(q_max) && (!causal || k_pos <= q_max);
}
SUITE_HD inline bool key_seen_by_all(bool causal, std::int64_t q_min, std::int64_t q_max,
                                     std::int64_t k_pos) {
  const std::int64_t dk = document_of(k_pos);
  return dk == document_of(q_min) && dk == document_of(q_max) && (!causal || k_pos <= q_min);
}

// sum over x = 1..n of min(x, cap), 0 for n <= 0: the visible keys of consecutive causal
// queries (query i sees min(ck, i + offset + 1) keys) summed in O(1).
SUITE_HD inline std::int64_t clamped_prefix_sum(std::int64_t n, std::int64_t cap) {
  if (n <= 0) return 0;
  if (n <= cap) return n * (n + 1) / 2;
  return cap * (cap + 1) / 2 + (n - cap) * cap;
}

// GQA: query head h reads K/V head h / g with g = heads / kv_heads.
SUITE_HD inline int kv_head_for(int q_head, int heads, int kv_heads) {
  return q_head / (heads / kv_heads);
}

SUITE_HD inline std::int64_t tile_count(std::int64_t n, std::int64_t tile) {
  return (n + tile - 1) / tile;
}

// One past the last index of tile `t` (tiles of size `tile` over [0, n)).
SUITE_HD inline std::int64_t tile_end(std::int64_t t, std::int64_t tile, std::int64_t n) {
  const std::int64_t e = (t + 1) * tile;
  return e < n ? e : n;
}

// Can any key of a tile (smallest position k_min) be visible to any query of a tile (largest
// position q_max)? False lets a kernel skip the whole tile pair. (With documents a true may
// still hide every pair: the element masks decide; false is always exact.)
SUITE_HD inline bool tile_pair_visible(bool causal, std::int64_t q_max, std::int64_t k_min) {
  return (!causal || k_min <= q_max) && document_of(k_min) <= document_of(q_max);
}

// Number of visible (query, key) pairs: the exact work of a causal block (FLOPs = 4 d heads
// times this).
inline std::int64_t visible_pairs(bool causal, const std::int64_t* q_pos, std::int64_t cq,
                                  const std::int64_t* k_pos, std::int64_t ck) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < cq; ++i) {
    for (std::int64_t j = 0; j < ck; ++j)
      n += key_visible(causal, q_pos[i], k_pos[j]) ? 1 : 0;
  }
  return n;
}

}  // namespace suite::kernels

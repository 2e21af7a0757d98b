// Attention forward for one query block against one key/value block on the CPU (T = float or
// double), plus the exact log-sum-exp merge of partial results. Shapes, strides and masks are
// described by AttentionParams (attention_index.hpp); q_pos / k_pos are the global positions
// of the block's tokens. Outputs: o [cq, heads, head_dim] with row stride ld_o and
// lse [heads, cq] (natural log). A query that sees no key gets o = 0 and lse = -inf.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/attention/attention_index.hpp"

namespace suite::kernels::cpu {

// Straightforward reference: every score in long double, softmax over all visible keys.
template <class T>
void attention_reference(const AttentionParams& p, const T* q, const T* k, const T* v,
                         const std::int64_t* q_pos, const std::int64_t* k_pos, T* o, T* lse);

// Fused, tiled online-softmax version (accumulates in T): the CPU backend's attention.
// Never materialises the cq x ck score matrix; skips tile pairs the causal mask hides.
// after_tile (if set) runs after every query tile: the ring uses it to progress MPI.
template <class T>
void attention_forward(const AttentionParams& p, const T* q, const T* k, const T* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, T* o, T* lse,
                       const std::function<void()>& after_tile = {});

// Unfused path (what Megatron stores for backward without a flash kernel): fills, for every
// head h, probs [heads, cq, ck] = softmax(scale q k^T) (0 where masked), mask [heads, cq, ck]
// (1 = kept) keyed by (seed, head_offset + h, q_pos, k_pos), and probs_dropped = probs * mask
// / (1 - dropout_p); then o = probs_dropped v and lse of the undropped softmax.
// head_offset is the global index of head 0, so sharding heads (TP) reproduces the masks.
template <class T>
void attention_unfused(const AttentionParams& p, float dropout_p, std::uint64_t seed,
                       int head_offset, const T* q, const T* k, const T* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, T* probs,
                       std::uint8_t* mask, T* probs_dropped, T* o, T* lse);

// Backward (METHODS.md section 5). Gradients are those of sum(d_o * o), o the attention of
// q over k, v; d_o has o's layout (row stride ld_o), dq q's (ld_q), dk / dv k's and v's
// (ld_k, ld_v); GQA: dk, dv of a K/V head sum over its group's query heads.

// Reference: from scratch in long double with its own softmax over the block's visible keys
// (no lse, no delta): overwrites dq, dk, dv. Queries that see no key contribute nothing.
template <class T>
void attention_backward_reference(const AttentionParams& p, const T* q, const T* k, const T* v,
                                  const T* d_o, const std::int64_t* q_pos,
                                  const std::int64_t* k_pos, T* dq, T* dk, T* dv);

// delta [heads, cq] = rowsum(d_o * o) per query and head (o, d_o [cq, heads, d], stride ld_o;
// accumulated in double).
template <class T>
void attention_backward_delta(std::int64_t cq, int heads, int head_dim, const T* o, const T* d_o,
                              std::int64_t ld_o, T* delta);

// Tiled FlashAttention-2 backward on BLAS GEMMs: ADDS this key block's contribution to dq, dk
// and dv, given the FINAL lse and delta of the queries (over every key block, so the
// contributions of disjoint key blocks sum to the full gradient): P = exp(scale q k^T - lse)
// (masked), dV += P^T dO, dP = dO V^T, dS = P (dP - delta), dQ += scale dS K,
// dK += scale dS^T Q. A query with lse = -inf (it sees no key at all) contributes nothing.
// after_tile (if set) runs between tiles, as in the forward.
template <class T>
void attention_backward(const AttentionParams& p, const T* q, const T* k, const T* v, const T* d_o,
                        const T* lse, const T* delta, const std::int64_t* q_pos,
                        const std::int64_t* k_pos, T* dq, T* dk, T* dv,
                        const std::function<void()>& after_tile = {});

// Merges partials (o_a, lse_a) and (o_b, lse_b) over disjoint key sets into (o, lse); o may
// alias o_a or o_b and lse may alias lse_a or lse_b (a running accumulator). Layouts as
// above: o rows of heads * head_dim with row strides ld_*, lse [heads, cq]. Start a running
// result from o = 0, lse = -inf.
template <class T>
void lse_merge(std::int64_t cq, int heads, int head_dim, const T* o_a, std::int64_t ld_a,
               const T* lse_a, const T* o_b, std::int64_t ld_b, const T* lse_b, T* o,
               std::int64_t ld_o, T* lse);

}  // namespace suite::kernels::cpu

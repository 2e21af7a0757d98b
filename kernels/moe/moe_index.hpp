// Index and ordering rules of the MoE kernels, shared by the CPU references and the CUDA
// kernels (SUITE_HD), so both backends choose, order and drop exactly alike.
#pragma once

#include <cstdint>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels::moe {

// Largest top-k the kernels take (the CUDA router keeps the k best in registers).
constexpr int kMaxTopK = 32;

// Top-k order: higher score first; equal scores: lower expert index first.
template <class S>
SUITE_HD inline bool score_before(S score_a, int expert_a, S score_b, int expert_b) {
  return score_a > score_b || (score_a == score_b && expert_a < expert_b);
}

// Inserts (score, expert) into best[0, n), kept sorted by score_before and capped at k entries.
template <class S>
SUITE_HD inline void topk_insert(S score, int expert, int k, int& n, S* best_score,
                                 int* best_expert) {
  if (n == k && !score_before(score, expert, best_score[k - 1], best_expert[k - 1])) return;
  int pos = n < k ? n++ : k - 1;
  while (pos > 0 && score_before(score, expert, best_score[pos - 1], best_expert[pos - 1])) {
    best_score[pos] = best_score[pos - 1];
    best_expert[pos] = best_expert[pos - 1];
    --pos;
  }
  best_score[pos] = score;
  best_expert[pos] = expert;
}

// The drop rule under a capacity limit: an expert keeps the copies that come first in this
// order and drops the rest: higher gate first; equal gates: lower global copy index first
// (copy index = global token * k + slot). So the lowest gates are dropped, deterministically.
SUITE_HD inline bool copy_kept_before(float gate_a, std::int64_t copy_a, float gate_b,
                                      std::int64_t copy_b) {
  return gate_a > gate_b || (gate_a == gate_b && copy_a < copy_b);
}

// Experts live on ranks in blocks: rank r of the EP group holds experts
// [r * per_rank, (r + 1) * per_rank).
SUITE_HD inline int expert_owner(int expert, int experts_per_rank) {
  return expert / experts_per_rank;
}
SUITE_HD inline int local_expert(int expert, int experts_per_rank) {
  return expert % experts_per_rank;
}

// Index of copy (token, slot) in the [tokens, k] routing arrays, and back to its token.
SUITE_HD inline std::int64_t copy_index(std::int64_t token, int slot, int k) {
  return token * k + slot;
}
SUITE_HD inline std::int64_t copy_token(std::int64_t copy, int k) {
  return copy / k;
}

}  // namespace suite::kernels::moe

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

// Node-limited routing (DeepSeek-V3): the E experts form `groups` equal blocks of consecutive
// experts (one per node), and a token may use at most `max_groups` of them: those whose best
// `per_group` selection scores sum highest (equal sums: lower group first); its top-k is then
// taken among those groups' experts. max_groups >= groups: no limit.
struct GroupLimit {
  int groups = 1, max_groups = 1, per_group = 1;
  SUITE_HD bool active() const { return max_groups < groups; }
};

// The limit is usable: groups split the experts evenly, max_groups and per_group within the
// kernels' top-k bound, and the allowed groups hold at least k experts.
SUITE_HD inline bool group_limit_valid(int experts, int k, GroupLimit g) {
  return g.groups >= 1 && experts % g.groups == 0 && g.max_groups >= 1 &&
         g.max_groups <= kMaxTopK && g.per_group >= 1 && g.per_group <= kMaxTopK &&
         g.per_group <= experts / g.groups && g.max_groups * (experts / g.groups) >= k;
}

// The token's allowed groups into best_group[0, max_groups), from score(e), its experts'
// selection scores (max_groups and per_group at most kMaxTopK).
template <class S, class ScoreFn>
SUITE_HD inline void top_groups(int experts, GroupLimit g, ScoreFn score, int* best_group) {
  const int size = experts / g.groups;
  S group_score[kMaxTopK];
  int n_groups = 0;
  for (int gi = 0; gi < g.groups; ++gi) {
    S top[kMaxTopK];
    int top_expert[kMaxTopK];
    int n = 0;
    for (int e = gi * size; e < (gi + 1) * size; ++e)
      topk_insert(score(e), e, g.per_group, n, top, top_expert);
    S sum = 0;
    for (int i = 0; i < n; ++i)
      sum += top[i];
    topk_insert(sum, gi, g.max_groups, n_groups, group_score, best_group);
  }
}

// Whether expert e lies in one of the groups best_group[0, max_groups).
SUITE_HD inline bool in_groups(int expert, int experts, GroupLimit g, const int* best_group) {
  const int gi = expert / (experts / g.groups);
  for (int i = 0; i < g.max_groups; ++i)
    if (best_group[i] == gi) return true;
  return false;
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

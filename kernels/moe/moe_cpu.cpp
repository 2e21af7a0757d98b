#include "kernels/moe/moe_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/moe/moe_grad.hpp"
#include "kernels/moe/moe_index.hpp"
#include "kernels/tokenwise/silu.hpp"

namespace suite::kernels::moe {

std::int64_t expert_capacity(double cf, int k, std::int64_t tokens, int experts) {
  if (!(cf > 0)) return -1;
  if (experts <= 0) throw std::invalid_argument("expert_capacity: experts must be positive");
  // The product is formed in long double so that exact quotients (1.25 * 2 * 64 / 4 = 40)
  // are not pushed over an integer by rounding before the ceiling.
  const long double c = static_cast<long double>(cf) * k * static_cast<long double>(tokens) /
                        static_cast<long double>(experts);
  return static_cast<std::int64_t>(std::ceil(c - 1e-12L * c));
}

void capacity_keep(std::int64_t copies, const std::int32_t* chosen, const float* gates, int experts,
                   std::int64_t capacity, std::uint8_t* keep) {
  if (capacity < 0) {
    std::fill(keep, keep + copies, std::uint8_t{1});
    return;
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(copies));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  // Group by expert, then the drop order within each expert.
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    if (chosen[a] != chosen[b]) return chosen[a] < chosen[b];
    return copy_kept_before(gates[a], a, gates[b], b);
  });
  std::int64_t taken = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::int64_t c = order[i];
    if (chosen[c] < 0 || chosen[c] >= experts)
      throw std::invalid_argument("capacity_keep: expert index out of range");
    if (i == 0 || chosen[order[i - 1]] != chosen[c]) taken = 0;
    keep[c] = taken < capacity ? 1 : 0;
    ++taken;
  }
}

DispatchPlan plan_dispatch(std::int64_t tokens, int k, int experts, int ranks,
                           const std::int32_t* chosen, const std::uint8_t* keep) {
  if (ranks <= 0 || experts % ranks != 0)
    throw std::invalid_argument("plan_dispatch: experts must be a multiple of ranks");
  DispatchPlan p;
  p.send_counts.assign(static_cast<std::size_t>(experts), 0);  // rank-major = expert order
  for (std::int64_t c = 0; c < tokens * k; ++c)
    if (keep[c]) ++p.send_counts[static_cast<std::size_t>(chosen[c])];
  // Block (rank, local expert) is block number `expert` since experts are owned in blocks.
  std::vector<std::int64_t> next(static_cast<std::size_t>(experts), 0);
  std::int64_t offset = 0;
  for (int e = 0; e < experts; ++e) {
    next[static_cast<std::size_t>(e)] = offset;
    offset += p.send_counts[static_cast<std::size_t>(e)];
  }
  p.send_src.assign(static_cast<std::size_t>(offset), 0);
  p.slot_pos.assign(static_cast<std::size_t>(tokens * k), -1);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (int s = 0; s < k; ++s) {
      const std::int64_t c = copy_index(t, s, k);
      if (!keep[c]) continue;
      const std::int64_t row = next[static_cast<std::size_t>(chosen[c])]++;
      p.send_src[static_cast<std::size_t>(row)] = t;
      p.slot_pos[static_cast<std::size_t>(c)] = row;
    }
  }
  return p;
}

RegroupPlan plan_regroup(int ranks, int experts_per_rank, const std::int64_t* recv_counts) {
  RegroupPlan p;
  p.expert_rows.assign(static_cast<std::size_t>(experts_per_rank), 0);
  std::vector<std::int64_t> block_start(static_cast<std::size_t>(ranks * experts_per_rank));
  std::int64_t total = 0;
  for (int r = 0; r < ranks; ++r) {
    for (int j = 0; j < experts_per_rank; ++j) {
      const std::int64_t n = recv_counts[r * experts_per_rank + j];
      if (n < 0) throw std::invalid_argument("plan_regroup: negative count");
      block_start[static_cast<std::size_t>(r * experts_per_rank + j)] = total;
      total += n;
      p.expert_rows[static_cast<std::size_t>(j)] += n;
    }
  }
  p.gather.reserve(static_cast<std::size_t>(total));
  for (int j = 0; j < experts_per_rank; ++j)
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t start = block_start[static_cast<std::size_t>(r * experts_per_rank + j)];
      for (std::int64_t i = 0; i < recv_counts[r * experts_per_rank + j]; ++i)
        p.gather.push_back(start + i);
    }
  p.scatter.assign(p.gather.size(), 0);
  for (std::size_t i = 0; i < p.gather.size(); ++i)
    p.scatter[static_cast<std::size_t>(p.gather[i])] = static_cast<std::int64_t>(i);
  return p;
}

namespace cpu {

template <class T>
void router_topk(std::int64_t tokens, int experts, int k, const T* logits, const float* logit_bias,
                 const float* select_bias, std::int32_t* chosen, float* gates, double* prob_sum,
                 GroupLimit limit) {
  if (k < 1 || k > experts || k > kMaxTopK)
    throw std::invalid_argument("router_topk: k must be in [1, min(experts, " +
                                std::to_string(kMaxTopK) + ")]");
  if (limit.active() && !group_limit_valid(experts, k, limit))
    throw std::invalid_argument(
        "router_topk: the group limit must split the experts evenly and "
        "leave k experts in max_groups groups");
  int best_group[kMaxTopK];
  std::vector<double> p(static_cast<std::size_t>(experts));
  double best_score[kMaxTopK];
  int best_expert[kMaxTopK];
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* z = logits + t * experts;
    double zmax = -INFINITY;
    for (int e = 0; e < experts; ++e)
      zmax = std::max(zmax, static_cast<double>(z[e]) + logit_bias[e]);
    double sum = 0;
    for (int e = 0; e < experts; ++e) {
      p[e] = std::exp(static_cast<double>(z[e]) + logit_bias[e] - zmax);
      sum += p[e];
    }
    for (int e = 0; e < experts; ++e) {
      p[e] /= sum;
      prob_sum[e] += p[e];
    }
    auto score = [&](int e) { return p[e] + (select_bias ? select_bias[e] : 0.0); };
    if (limit.active()) top_groups<double>(experts, limit, score, best_group);
    int n = 0;
    for (int e = 0; e < experts; ++e)
      if (!limit.active() || in_groups(e, experts, limit, best_group))
        topk_insert(score(e), e, k, n, best_score, best_expert);
    double chosen_sum = 0;
    for (int s = 0; s < k; ++s)
      chosen_sum += p[best_expert[s]];
    for (int s = 0; s < k; ++s) {
      chosen[copy_index(t, s, k)] = best_expert[s];
      gates[copy_index(t, s, k)] = static_cast<float>(p[best_expert[s]] / chosen_sum);
    }
  }
}

template <class T>
void gather_rows(std::int64_t rows, std::int64_t cols, const std::int64_t* src, const T* in,
                 T* out) {
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy(in + src[i] * cols, in + (src[i] + 1) * cols, out + i * cols);
}

template <class T>
void combine(std::int64_t tokens, int k, std::int64_t cols, const std::int64_t* slot_pos,
             const float* gates, const T* back, T* out) {
  std::vector<double> acc(static_cast<std::size_t>(cols));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int s = 0; s < k; ++s) {
      const std::int64_t pos = slot_pos[copy_index(t, s, k)];
      if (pos < 0) continue;
      const double g = gates ? gates[copy_index(t, s, k)] : 1.0;
      for (std::int64_t c = 0; c < cols; ++c)
        acc[c] += g * static_cast<double>(back[pos * cols + c]);
    }
    for (std::int64_t c = 0; c < cols; ++c)
      out[t * cols + c] = static_cast<T>(acc[c]);
  }
}

template <class T>
void combine_backward(std::int64_t tokens, int k, std::int64_t cols, const std::int64_t* slot_pos,
                      const float* gates, const T* grad_out, const T* back, T* grad_back,
                      float* gate_grad) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* dy = grad_out + t * cols;
    for (int s = 0; s < k; ++s) {
      const std::int64_t c = copy_index(t, s, k), pos = slot_pos[c];
      if (pos < 0) {
        gate_grad[c] = 0;
        continue;
      }
      const T* y = back + pos * cols;
      T* row = grad_back + pos * cols;
      const double g = gates[c];
      double dot = 0;
      for (std::int64_t j = 0; j < cols; ++j) {
        dot += static_cast<double>(dy[j]) * static_cast<double>(y[j]);
        row[j] = static_cast<T>(g * static_cast<double>(dy[j]));
      }
      gate_grad[c] = static_cast<float>(dot);
    }
  }
}

template <class T>
void router_backward(std::int64_t tokens, int experts, int k, const T* logits,
                     const float* logit_bias, const std::int32_t* chosen, const float* gate_grad,
                     const float* prob_grad, T* dlogits) {
  std::vector<double> p(static_cast<std::size_t>(experts)), dp(p.size());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* z = logits + t * experts;
    double zmax = -INFINITY, sum = 0;
    for (int e = 0; e < experts; ++e)
      zmax = std::max(zmax, static_cast<double>(z[e]) + logit_bias[e]);
    for (int e = 0; e < experts; ++e)
      sum += p[e] = std::exp(static_cast<double>(z[e]) + logit_bias[e] - zmax);
    double chosen_sum = 0, weighted = 0;
    for (int e = 0; e < experts; ++e) {
      p[e] /= sum;
      dp[e] = prob_grad[e];
    }
    for (int s = 0; s < k; ++s)
      chosen_sum += p[chosen[copy_index(t, s, k)]];
    for (int s = 0; s < k; ++s) {
      const std::int64_t c = copy_index(t, s, k);
      weighted += gate_grad[c] * (p[chosen[c]] / chosen_sum);
    }
    for (int s = 0; s < k; ++s) {
      const std::int64_t c = copy_index(t, s, k);
      dp[chosen[c]] += gate_to_prob_grad<double>(gate_grad[c], weighted, chosen_sum);
    }
    double p_dot_dp = 0;
    for (int e = 0; e < experts; ++e)
      p_dot_dp += p[e] * dp[e];
    for (int e = 0; e < experts; ++e)
      dlogits[t * experts + e] = static_cast<T>(softmax_grad(p[e], dp[e], p_dot_dp));
  }
}

template <class T>
void swiglu_backward(std::int64_t rows, std::int64_t cols, const T* x, const T* dy, T* dx) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double a = x[swiglu_gate_index(r, c, cols)], b = x[swiglu_up_index(r, c, cols)];
      const double g = dy[r * cols + c];
      dx[swiglu_gate_index(r, c, cols)] = static_cast<T>(g * b * silu_grad(a));
      dx[swiglu_up_index(r, c, cols)] = static_cast<T>(g * silu(a));
    }
}

#define SUITE_INSTANTIATE_MOE(T)                                                               \
  template void router_topk<T>(std::int64_t, int, int, const T*, const float*, const float*,   \
                               std::int32_t*, float*, double*, GroupLimit);                    \
  template void gather_rows<T>(std::int64_t, std::int64_t, const std::int64_t*, const T*, T*); \
  template void combine<T>(std::int64_t, int, std::int64_t, const std::int64_t*, const float*, \
                           const T*, T*);                                                      \
  template void combine_backward<T>(std::int64_t, int, std::int64_t, const std::int64_t*,      \
                                    const float*, const T*, const T*, T*, float*);             \
  template void router_backward<T>(std::int64_t, int, int, const T*, const float*,             \
                                   const std::int32_t*, const float*, const float*, T*);       \
  template void swiglu_backward<T>(std::int64_t, std::int64_t, const T*, const T*, T*);
SUITE_INSTANTIATE_MOE(float)
SUITE_INSTANTIATE_MOE(double)
#undef SUITE_INSTANTIATE_MOE

}  // namespace cpu
}  // namespace suite::kernels::moe

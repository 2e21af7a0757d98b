// Unfused attention on the CPU: the two batched matmuls go through the blocked GEMM, the
// softmax + dropout through one pass over each materialised score row.
#include <cmath>
#include <limits>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/core/counter_rng.hpp"
#include "kernels/gemm/gemm_cpu.hpp"

namespace suite::kernels::cpu {

template <class T>
void attention_unfused(const AttentionParams& p, float dropout_p, std::uint64_t seed,
                       int head_offset, const T* q, const T* k, const T* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, T* probs,
                       std::uint8_t* mask, T* probs_dropped, T* o, T* lse) {
  validate_attention(p);
  const std::uint32_t threshold = dropout_threshold(dropout_p);
  const T keep_scale = T(1) / (T(1) - static_cast<T>(dropout_p));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int d = p.head_dim;
  const std::int64_t plane = p.cq * p.ck;
  for (int h = 0; h < p.heads; ++h) {
    const int kh = kv_head_for(h, p.heads, p.kv_heads);
    T* ph = probs + h * plane;
    gemm<T>(false, true, p.cq, p.ck, d, static_cast<T>(p.softmax_scale), q + h * d, p.ld_q,
            k + kh * d, p.ld_k, T(0), ph, p.ck);
    for (std::int64_t i = 0; i < p.cq; ++i) {
      T* row = ph + i * p.ck;
      T m = neg_inf;
      for (std::int64_t j = 0; j < p.ck; ++j) {
        if (!key_visible(p.causal, q_pos[i], k_pos[j])) row[j] = neg_inf;
        m = std::max(m, row[j]);
      }
      double l = 0;
      for (std::int64_t j = 0; j < p.ck; ++j) {
        row[j] = m == neg_inf ? T(0) : std::exp(row[j] - m);  // exp(-inf) = 0 when masked
        l += row[j];
      }
      lse[h * p.cq + i] = l > 0 ? static_cast<T>(m + std::log(l)) : neg_inf;
      const T inv_l = l > 0 ? static_cast<T>(1.0 / l) : T(0);
      std::uint8_t* mrow = mask + h * plane + i * p.ck;
      T* drow = probs_dropped + h * plane + i * p.ck;
      for (std::int64_t j = 0; j < p.ck; ++j) {
        row[j] *= inv_l;
        const bool keep =
            attention_dropout_keep(seed, head_offset + h, q_pos[i], k_pos[j], threshold);
        mrow[j] = keep ? 1 : 0;
        drow[j] = keep ? row[j] * keep_scale : T(0);
      }
    }
    gemm<T>(false, false, p.cq, d, p.ck, T(1), probs_dropped + h * plane, p.ck, v + kh * d, p.ld_v,
            T(0), o + h * d, p.ld_o);
  }
}

#define SUITE_INSTANTIATE_ATTN_UNFUSED(T)                                                          \
  template void attention_unfused<T>(const AttentionParams&, float, std::uint64_t, int, const T*,  \
                                     const T*, const T*, const std::int64_t*, const std::int64_t*, \
                                     T*, std::uint8_t*, T*, T*, T*);
SUITE_INSTANTIATE_ATTN_UNFUSED(float)
SUITE_INSTANTIATE_ATTN_UNFUSED(double)
#undef SUITE_INSTANTIATE_ATTN_UNFUSED

}  // namespace suite::kernels::cpu

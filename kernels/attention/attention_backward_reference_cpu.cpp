// The clear version of the attention backward, for the tests: per query, its own softmax over
// the visible keys in long double, then the textbook gradients. It takes no lse and no delta,
// so it shares nothing with the tiled kernel beyond the mask rule.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"

namespace suite::kernels::cpu {

template <class T>
void attention_backward_reference(const AttentionParams& p, const T* q, const T* k, const T* v,
                                  const T* d_o, const std::int64_t* q_pos,
                                  const std::int64_t* k_pos, T* dq, T* dk, T* dv) {
  validate_attention(p);
  using L = long double;
  const int d = p.head_dim;
  const L scale = static_cast<L>(p.softmax_scale);
  const auto ck = static_cast<std::size_t>(p.ck);
  std::vector<L> acc_dk(ck * p.kv_heads * d, 0), acc_dv(ck * p.kv_heads * d, 0);
  std::vector<L> prob(ck), dprob(ck);
  for (int h = 0; h < p.heads; ++h) {
    const int kh = kv_head_for(h, p.heads, p.kv_heads);
    for (std::int64_t i = 0; i < p.cq; ++i) {
      const T* qi = q + i * p.ld_q + h * d;
      const T* gi = d_o + i * p.ld_o + h * d;
      T* dqi = dq + i * p.ld_q + h * d;
      L m = -std::numeric_limits<L>::infinity();
      for (std::int64_t j = 0; j < p.ck; ++j) {
        prob[j] = -std::numeric_limits<L>::infinity();
        if (!key_visible(p.causal, q_pos[i], k_pos[j])) continue;
        L dot = 0;
        for (int c = 0; c < d; ++c)
          dot += static_cast<L>(qi[c]) * k[j * p.ld_k + kh * d + c];
        prob[j] = dot * scale;
        m = std::max(m, prob[j]);
      }
      for (int c = 0; c < d; ++c)
        dqi[c] = T(0);
      if (m == -std::numeric_limits<L>::infinity()) continue;  // sees no key: no gradient
      L sum = 0;
      for (std::int64_t j = 0; j < p.ck; ++j) {
        prob[j] = std::isinf(prob[j]) ? 0 : std::exp(prob[j] - m);
        sum += prob[j];
      }
      // dP_j = dO . v_j; D = sum_j P_j dP_j; dS_j = P_j (dP_j - D).
      L big_d = 0;
      for (std::int64_t j = 0; j < p.ck; ++j) {
        prob[j] /= sum;
        L dot = 0;
        for (int c = 0; c < d; ++c)
          dot += static_cast<L>(gi[c]) * v[j * p.ld_v + kh * d + c];
        dprob[j] = dot;
        big_d += prob[j] * dot;
      }
      std::vector<L> acc_dq(static_cast<std::size_t>(d), 0);
      for (std::int64_t j = 0; j < p.ck; ++j) {
        if (prob[j] == 0) continue;
        const L ds = prob[j] * (dprob[j] - big_d);
        const std::size_t row = (static_cast<std::size_t>(j) * p.kv_heads + kh) * d;
        for (int c = 0; c < d; ++c) {
          acc_dq[c] += scale * ds * k[j * p.ld_k + kh * d + c];
          acc_dk[row + c] += scale * ds * qi[c];
          acc_dv[row + c] += prob[j] * gi[c];
        }
      }
      for (int c = 0; c < d; ++c)
        dqi[c] = static_cast<T>(acc_dq[c]);
    }
  }
  for (std::int64_t j = 0; j < p.ck; ++j)
    for (int kh = 0; kh < p.kv_heads; ++kh)
      for (int c = 0; c < d; ++c) {
        const std::size_t idx = (static_cast<std::size_t>(j) * p.kv_heads + kh) * d + c;
        dk[j * p.ld_k + kh * d + c] = static_cast<T>(acc_dk[idx]);
        dv[j * p.ld_v + kh * d + c] = static_cast<T>(acc_dv[idx]);
      }
}

#define SUITE_INSTANTIATE_ATTN_BWD_REF(T)                                                   \
  template void attention_backward_reference<T>(const AttentionParams&, const T*, const T*, \
                                                const T*, const T*, const std::int64_t*,    \
                                                const std::int64_t*, T*, T*, T*);
SUITE_INSTANTIATE_ATTN_BWD_REF(float)
SUITE_INSTANTIATE_ATTN_BWD_REF(double)
#undef SUITE_INSTANTIATE_ATTN_BWD_REF

}  // namespace suite::kernels::cpu

// The clear version: reference attention (one query at a time, long double).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"

namespace suite::kernels::cpu {

template <class T>
void attention_reference(const AttentionParams& p, const T* q, const T* k, const T* v,
                         const std::int64_t* q_pos, const std::int64_t* k_pos, T* o, T* lse) {
  validate_attention(p);
  using L = long double;
  const int d = p.head_dim;
  std::vector<L> s(static_cast<std::size_t>(p.ck));
  std::vector<L> acc(static_cast<std::size_t>(d));
  for (int h = 0; h < p.heads; ++h) {
    const int kh = kv_head_for(h, p.heads, p.kv_heads);
    for (std::int64_t i = 0; i < p.cq; ++i) {
      const T* qi = q + i * p.ld_q + h * d;
      L m = -std::numeric_limits<L>::infinity();
      for (std::int64_t j = 0; j < p.ck; ++j) {
        if (!key_visible(p.causal, q_pos[i], k_pos[j])) {
          s[j] = -std::numeric_limits<L>::infinity();
          continue;
        }
        const T* kj = k + j * p.ld_k + kh * d;
        L dot = 0;
        for (int c = 0; c < d; ++c)
          dot += static_cast<L>(qi[c]) * kj[c];
        s[j] = dot * static_cast<L>(p.softmax_scale);
        m = std::max(m, s[j]);
      }
      T* oi = o + i * p.ld_o + h * d;
      if (m == -std::numeric_limits<L>::infinity()) {  // no visible key
        for (int c = 0; c < d; ++c)
          oi[c] = T(0);
        lse[h * p.cq + i] = -std::numeric_limits<T>::infinity();
        continue;
      }
      L l = 0;
      std::fill(acc.begin(), acc.end(), L(0));
      for (std::int64_t j = 0; j < p.ck; ++j) {
        if (s[j] == -std::numeric_limits<L>::infinity()) continue;
        const L w = std::exp(s[j] - m);
        l += w;
        const T* vj = v + j * p.ld_v + kh * d;
        for (int c = 0; c < d; ++c)
          acc[c] += w * vj[c];
      }
      for (int c = 0; c < d; ++c)
        oi[c] = static_cast<T>(acc[c] / l);
      lse[h * p.cq + i] = static_cast<T>(m + std::log(l));
    }
  }
}

#define SUITE_INSTANTIATE_ATTN_REF(T)                                                        \
  template void attention_reference<T>(const AttentionParams&, const T*, const T*, const T*, \
                                       const std::int64_t*, const std::int64_t*, T*, T*);
SUITE_INSTANTIATE_ATTN_REF(float)
SUITE_INSTANTIATE_ATTN_REF(double)
#undef SUITE_INSTANTIATE_ATTN_REF

}  // namespace suite::kernels::cpu

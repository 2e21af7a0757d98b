// Tiled online-softmax attention on the CPU. Per K/V head, K is transposed once to [d][ck] so
// both inner loops (scores over keys, P V over features) run over contiguous memory without a
// reduction, which the compiler vectorises without -ffast-math.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"

namespace suite::kernels::cpu {
namespace {

constexpr std::int64_t kTileQ = 32;
constexpr std::int64_t kTileK = 128;

// Running softmax state of one query tile.
template <class T>
struct TileState {
  std::vector<T> m, l, acc;  // acc: [kTileQ][d]
  explicit TileState(int d) : m(kTileQ), l(kTileQ), acc(static_cast<std::size_t>(kTileQ) * d) {}
  void reset() {
    std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
    std::fill(l.begin(), l.end(), T(0));
    std::fill(acc.begin(), acc.end(), T(0));
  }
};

template <class T>
std::int64_t min_pos(const std::int64_t* pos, std::int64_t b, std::int64_t e) {
  return *std::min_element(pos + b, pos + e);
}

template <class T>
std::int64_t max_pos(const std::int64_t* pos, std::int64_t b, std::int64_t e) {
  return *std::max_element(pos + b, pos + e);
}

}  // namespace

template <class T>
void attention_forward(const AttentionParams& p, const T* q, const T* k, const T* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, T* o, T* lse,
                       const std::function<void()>& after_tile) {
  validate_attention(p);
  const int d = p.head_dim;
  const T scale = static_cast<T>(p.softmax_scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int group = p.heads / p.kv_heads;
  std::vector<T> kt(static_cast<std::size_t>(d) * std::max<std::int64_t>(p.ck, 1));
  std::vector<T> s(static_cast<std::size_t>(kTileQ * kTileK));
  TileState<T> st(d);

  for (int kh = 0; kh < p.kv_heads; ++kh) {
    for (std::int64_t j = 0; j < p.ck; ++j) {
      for (int c = 0; c < d; ++c)
        kt[c * p.ck + j] = k[j * p.ld_k + kh * d + c];
    }
    for (int h = kh * group; h < (kh + 1) * group; ++h) {
      for (std::int64_t qt = 0; qt < tile_count(p.cq, kTileQ); ++qt) {
        const std::int64_t i0 = qt * kTileQ, i1 = tile_end(qt, kTileQ, p.cq);
        const std::int64_t q_max = max_pos<T>(q_pos, i0, i1);
        st.reset();
        for (std::int64_t kt_i = 0; kt_i < tile_count(p.ck, kTileK); ++kt_i) {
          const std::int64_t j0 = kt_i * kTileK, j1 = tile_end(kt_i, kTileK, p.ck);
          if (!tile_pair_visible(p.causal, q_max, min_pos<T>(k_pos, j0, j1))) continue;
          const std::int64_t nj = j1 - j0;
          for (std::int64_t i = i0; i < i1; ++i) {
            T* si = s.data() + (i - i0) * kTileK;
            std::fill(si, si + nj, T(0));
            const T* qi = q + i * p.ld_q + h * d;
            for (int c = 0; c < d; ++c) {
              const T qc = qi[c] * scale;
              const T* kc = kt.data() + c * p.ck + j0;
              for (std::int64_t j = 0; j < nj; ++j)
                si[j] += qc * kc[j];
            }
            // Online softmax: rescale what was accumulated when the running max grows.
            T m_new = st.m[i - i0];
            for (std::int64_t j = 0; j < nj; ++j) {
              if (!key_visible(p.causal, q_pos[i], k_pos[j0 + j])) si[j] = neg_inf;
              m_new = std::max(m_new, si[j]);
            }
            if (m_new == neg_inf) continue;  // nothing visible yet for this query
            T* acc = st.acc.data() + (i - i0) * d;
            const T corr = std::exp(st.m[i - i0] - m_new);
            T l = st.l[i - i0] * corr;
            for (int c = 0; c < d; ++c)
              acc[c] *= corr;
            for (std::int64_t j = 0; j < nj; ++j) {
              if (si[j] == neg_inf) continue;
              const T w = std::exp(si[j] - m_new);
              l += w;
              const T* vj = v + (j0 + j) * p.ld_v + kh * d;
              for (int c = 0; c < d; ++c)
                acc[c] += w * vj[c];
            }
            st.m[i - i0] = m_new;
            st.l[i - i0] = l;
          }
        }
        for (std::int64_t i = i0; i < i1; ++i) {
          T* oi = o + i * p.ld_o + h * d;
          const T l = st.l[i - i0];
          const T* acc = st.acc.data() + (i - i0) * d;
          if (l == T(0)) {
            std::fill(oi, oi + d, T(0));
            lse[h * p.cq + i] = neg_inf;
          } else {
            for (int c = 0; c < d; ++c)
              oi[c] = acc[c] / l;
            lse[h * p.cq + i] = st.m[i - i0] + std::log(l);
          }
        }
        if (after_tile) after_tile();
      }
    }
  }
}

#define SUITE_INSTANTIATE_ATTN_TILED(T)                                                    \
  template void attention_forward<T>(const AttentionParams&, const T*, const T*, const T*, \
                                     const std::int64_t*, const std::int64_t*, T*, T*,     \
                                     const std::function<void()>&);
SUITE_INSTANTIATE_ATTN_TILED(float)
SUITE_INSTANTIATE_ATTN_TILED(double)
#undef SUITE_INSTANTIATE_ATTN_TILED

}  // namespace suite::kernels::cpu

// Tiled FlashAttention-2 backward on the CPU: per head, query tile and key tile, five BLAS
// GEMMs (S = scale Q K^T, dV += P^T dO, dP = dO V^T, dQ += scale dS K, dK += scale dS^T Q)
// with the probabilities recomputed from the final lse and dS = P (dP - D) formed row by row
// between them. Only one query tile against one key tile is ever held.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_tile_range.hpp"
#include "kernels/attention/softmax_rows_cpu.hpp"
#include "kernels/core/blas_cpu.hpp"

namespace suite::kernels::cpu {
namespace {

constexpr std::int64_t kTileQ = 128;  // rows of a query tile (GEMM rows where nothing is masked)
// Rows per GEMM at most where a causal diagonal or a document boundary crosses the tile (a
// sub-tile also ends at each document boundary).
constexpr std::int64_t kSubQ = 64;
// The backward computes a causal diagonal inside a sub-tile whole (the forward cuts it into
// pieces): with its five GEMMs per call, pieces of 16 rows were no faster on striped blocks of
// lognormal:256:1 documents (0.85 to 0.86 of the whole pack's pairs per second either way;
// 0.72 against 0.74 on another draw) and pieces of 8 slower (0.81 to 0.82). One-off timing.
constexpr std::int64_t kPieceQ = kSubQ;
constexpr std::int64_t kTileK = 256;

}  // namespace

template <class T>
void attention_backward_delta(std::int64_t cq, int heads, int head_dim, const T* o, const T* d_o,
                              std::int64_t ld_o, T* delta) {
  for (int h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < cq; ++i) {
      const T* oi = o + i * ld_o + h * head_dim;
      const T* gi = d_o + i * ld_o + h * head_dim;
      double sum = 0;
      for (int c = 0; c < head_dim; ++c)
        sum += static_cast<double>(oi[c]) * gi[c];
      delta[h * cq + i] = static_cast<T>(sum);
    }
}

template <class T>
void attention_backward(const AttentionParams& p, const T* q, const T* k, const T* v, const T* d_o,
                        const T* lse, const T* delta, const std::int64_t* q_pos,
                        const std::int64_t* k_pos, T* dq, T* dk, T* dv,
                        const std::function<void()>& after_tile) {
  const TileCalls calls(p, q_pos, k_pos, {kTileQ, kTileK, kSubQ, kPieceQ});  // validates p
  const int d = p.head_dim;
  const T scale = static_cast<T>(p.softmax_scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const auto tile_elems = static_cast<std::size_t>(calls.tile_rows() * calls.tile_cols());
  std::vector<T> prob(tile_elems);
  std::vector<T> grad(tile_elems);  // dP, then dS in place

  for (int h = 0; h < p.heads; ++h) {
    const int kh = kv_head_of(p, h);
    for (std::int64_t qt = 0; qt < tile_count(p.cq, kTileQ); ++qt) {
      const std::int64_t i0 = qt * kTileQ;
      const T* q_tile = q + i0 * p.ld_q + h * d;
      const T* do_tile = d_o + i0 * p.ld_o + h * d;
      T* dq_tile = dq + i0 * p.ld_q + h * d;
      // Rows [r0, r1) of the tile against the keys of `span`: the five GEMMs.
      auto attend = [&](std::int64_t r0, std::int64_t r1, const KeySpan& span) {
        const std::int64_t rows = r1 - r0, a = span.begin, nj = span.end - span.begin;
        const T* qr = q_tile + r0 * p.ld_q;
        const T* dor = do_tile + r0 * p.ld_o;
        const T* k_tile = k + a * p.ld_k + kh * d;
        const T* v_tile = v + a * p.ld_v + kh * d;
        blas_gemm<T>(false, true, rows, nj, d, scale, qr, p.ld_q, k_tile, p.ld_k, T(0), prob.data(),
                     nj);
        for (std::int64_t i = r0; i < r1; ++i) {
          T* row = prob.data() + (i - r0) * nj;
          const T row_lse = lse[h * p.cq + i0 + i];
          if (row_lse == neg_inf) {  // the query sees no key anywhere: no gradient
            std::fill(row, row + nj, T(0));
            continue;
          }
          if (span.needs_mask) {
            const KeyWindow w = visible_window(p.causal, q_pos[i0 + i]);
            mask_row(row, k_pos + a, nj, w.lo, w.hi);
          }
          exp_shift(row, nj, row_lse);
        }
        blas_gemm<T>(true, false, nj, d, rows, T(1), prob.data(), nj, dor, p.ld_o, T(1),
                     dv + a * p.ld_v + kh * d, p.ld_v);
        blas_gemm<T>(false, true, rows, nj, d, T(1), dor, p.ld_o, v_tile, p.ld_v, T(0), grad.data(),
                     nj);
        for (std::int64_t i = r0; i < r1; ++i)
          softmax_grad_row(grad.data() + (i - r0) * nj, prob.data() + (i - r0) * nj, nj,
                           delta[h * p.cq + i0 + i]);
        blas_gemm<T>(false, false, rows, d, nj, scale, grad.data(), nj, k_tile, p.ld_k, T(1),
                     dq_tile + r0 * p.ld_q, p.ld_q);
        blas_gemm<T>(true, false, nj, d, rows, scale, grad.data(), nj, qr, p.ld_q, T(1),
                     dk + a * p.ld_k + kh * d, p.ld_k);
      };
      calls.run(qt, attend);
      if (after_tile) after_tile();
    }
  }
}

#define SUITE_INSTANTIATE_ATTN_BWD(T)                                                     \
  template void attention_backward_delta<T>(std::int64_t, int, int, const T*, const T*,   \
                                            std::int64_t, T*);                            \
  template void attention_backward<T>(                                                    \
      const AttentionParams&, const T*, const T*, const T*, const T*, const T*, const T*, \
      const std::int64_t*, const std::int64_t*, T*, T*, T*, const std::function<void()>&);
SUITE_INSTANTIATE_ATTN_BWD(float)
SUITE_INSTANTIATE_ATTN_BWD(double)
#undef SUITE_INSTANTIATE_ATTN_BWD

}  // namespace suite::kernels::cpu

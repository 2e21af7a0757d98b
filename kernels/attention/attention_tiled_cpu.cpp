// Tiled online-softmax attention on the CPU: per head and query tile, S = scale Q K^T and
// O += P V are BLAS GEMMs over key tiles; between them the rows are masked, their running max
// and sum updated and exponentiated by the vectorised row operations. The cq x ck score
// matrix is never materialised, only one query tile against one key tile.
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

constexpr std::int64_t kTileQ = 256;  // rows of a query tile (GEMM rows where nothing is masked)
// Rows per GEMM at most where a causal diagonal or a document boundary crosses the tile (a
// sub-tile also ends at each document boundary).
constexpr std::int64_t kSubQ = 64;
// Rows per GEMM at most on a causal diagonal inside such a sub-tile: smaller GEMMs, less work
// above the diagonal. On striped blocks of lognormal:256:1 documents (4 ranks) the forward
// computed 0.86 to 0.88 of the whole pack's pairs per second with pieces of 16 rows, 0.83 to
// 0.84 without (another draw: 0.79 against 0.74), while exp was scalar. With the vectorised
// row operations pieces of 16, 32 and 64 rows are within noise of each other (0.77 to 0.80;
// 0.60 to 0.67 on the other draw). One-off timings.
constexpr std::int64_t kPieceQ = 16;
constexpr std::int64_t kTileK = 512;

}  // namespace

template <class T>
void attention_forward(const AttentionParams& p, const T* q, const T* k, const T* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, T* o, T* lse,
                       const std::function<void()>& after_tile) {
  const TileCalls calls(p, q_pos, k_pos, {kTileQ, kTileK, kSubQ, kPieceQ});  // validates p
  const int d = p.head_dim;
  const T scale = static_cast<T>(p.softmax_scale);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const std::int64_t tile_rows = calls.tile_rows();
  std::vector<T> s(static_cast<std::size_t>(tile_rows * padded_row_length<T>(calls.tile_cols())));
  std::vector<T> acc(static_cast<std::size_t>(tile_rows * d)), m(tile_rows), l(tile_rows);

  for (int h = 0; h < p.heads; ++h) {
    const int kh = kv_head_of(p, h);
    for (std::int64_t qt = 0; qt < tile_count(p.cq, kTileQ); ++qt) {
      const std::int64_t i0 = qt * kTileQ, i1 = tile_end(qt, kTileQ, p.cq), tq = i1 - i0;
      std::fill(m.begin(), m.end(), neg_inf);
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.end(), T(0));
      const T* q_tile = q + i0 * p.ld_q + h * d;
      // Rows [r0, r1) of the tile against the keys of `span`: S = scale Q K^T, online
      // softmax per row, acc += P V.
      auto attend = [&](std::int64_t r0, std::int64_t r1, const KeySpan& span) {
        const std::int64_t rows = r1 - r0, a = span.begin, nj = span.end - span.begin;
        const std::int64_t ld_s = padded_row_length<T>(nj);
        blas_gemm<T>(false, true, rows, nj, d, scale, q_tile + r0 * p.ld_q, p.ld_q,
                     k + a * p.ld_k + kh * d, p.ld_k, T(0), s.data(), ld_s);
        for (std::int64_t i = r0; i < r1; ++i) {
          T* row = s.data() + (i - r0) * ld_s;
          if (span.needs_mask) {
            const KeyWindow w = visible_window(p.causal, q_pos[i0 + i]);
            mask_row(row, k_pos + a, nj, w.lo, w.hi);
          }
          std::fill(row + nj, row + ld_s, neg_inf);
        }
        online_softmax_rows(s.data(), rows, ld_s, m.data() + r0, l.data() + r0, acc.data() + r0 * d,
                            std::int64_t{d});
        blas_gemm<T>(false, false, rows, d, nj, T(1), s.data(), ld_s, v + a * p.ld_v + kh * d,
                     p.ld_v, T(1), acc.data() + r0 * d, d);
      };
      calls.run(qt, attend);
      for (std::int64_t i = 0; i < tq; ++i) {
        T* oi = o + (i0 + i) * p.ld_o + h * d;
        if (l[i] == T(0)) {  // no visible key at all
          std::fill(oi, oi + d, T(0));
          lse[h * p.cq + i0 + i] = neg_inf;
          continue;
        }
        const T inv = T(1) / l[i];
        for (int c = 0; c < d; ++c)
          oi[c] = acc[static_cast<std::size_t>(i * d + c)] * inv;
        lse[h * p.cq + i0 + i] = m[i] + std::log(l[i]);
      }
      if (after_tile) after_tile();
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

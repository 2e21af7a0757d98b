// The body of the FlashAttention-2-style tensor-core kernel (flash_attention_mma.cu): what one
// thread of one block does, written against a hardware policy `Hw` that supplies the warp and
// block primitives (mma.sync, ldmatrix, cp.async, shuffles, barriers). On the GPU, Hw is the
// inline-PTX policy of flash_attention_mma.cu; on the CPU, the tests' SIMT emulator runs this
// same source with an emulated policy, so the kernel's indexing, fragments, masking, online
// softmax and cp.async staging are checked on every build, GPU or not.
//
// One block per (64-query tile, head), four warps of 16 query rows each. The block's Q tile is
// staged once through shared memory into registers (A fragments); K and V tiles of 64 keys are
// double-buffered in shared memory with cp.async, so the next tile loads while this one
// computes. Per tile each warp computes S = Q K^T (16 x 64, fp32 in registers), masks it from
// the global positions where the tile needs a mask, updates its running row max and sum
// (online softmax, base-2), rounds P to bf16 and accumulates O += P V (V fragments through
// ldmatrix.trans). Tile pairs without a visible key are skipped (not even loaded); tiles that
// are fully visible are computed without a mask. lse = ln(sum exp(scaled scores)), fp32.
//
// Hw provides: Elem (2-byte bf16 storage); cp_async16(dst, src, src_bytes),
// cp_async_commit(), cp_async_wait<N>(); sync_threads(); shfl_xor(float | int64, lane_mask);
// mma(c[4], a[4], b0, b1) (m16n8k16, bf16 in, fp32 accumulate); ldmatrix_x4_trans(r[4],
// row_addr); pack_bf16(lo, hi); lds32(p) and store32(p, v) (a bf16 pair); store_lse(p, v).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_index.hpp"
#include "kernels/attention/tile_mask.hpp"

#if defined(__CUDACC__)
#define SUITE_MMA_FN __device__ __forceinline__
#define SUITE_UNROLL _Pragma("unroll")
#else
#define SUITE_MMA_FN inline
#define SUITE_UNROLL
#endif

namespace suite::kernels::flash_mma {

constexpr int kWarps = 4;
constexpr int kBr = 16 * kWarps;  // query rows per block
constexpr int kBc = 64;           // keys per tile
constexpr int kThreads = 32 * kWarps;
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kLog2e = 1.442695040888963407f;

// Dynamic shared memory of one block: the Q tile, two stages of K and V, then one int64 per
// warp (its largest query position).
template <int D>
constexpr int smem_bytes() {
  return mma_smem_bytes(D, kBr, kBc) + kWarps * static_cast<int>(sizeof(std::int64_t));
}

struct KeyRange {
  std::int64_t lo, hi;
  bool any;
};

// Folds [x_lo, x_hi] into [lo, hi].
SUITE_MMA_FN void widen(std::int64_t& lo, std::int64_t& hi, std::int64_t x_lo, std::int64_t x_hi) {
  lo = x_lo < lo ? x_lo : lo;
  hi = x_hi > hi ? x_hi : hi;
}

// [lo, hi] over the whole warp (every lane gets the result).
template <class Hw>
SUITE_MMA_FN void warp_range(std::int64_t& lo, std::int64_t& hi) {
  SUITE_UNROLL
  for (int off = 16; off > 0; off >>= 1)
    widen(lo, hi, Hw::shfl_xor(lo, off), Hw::shfl_xor(hi, off));
}

// Min and max position of key tile [j0, j0 + kBc) (valid keys only), computed by one warp.
template <class Hw>
SUITE_MMA_FN KeyRange key_range(const std::int64_t* __restrict__ k_pos, std::int64_t ck,
                                std::int64_t j0, int lane) {
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int r = lane; r < kBc; r += 32) {
    if (j0 + r < ck) widen(lo, hi, k_pos[j0 + r], k_pos[j0 + r]);
  }
  warp_range<Hw>(lo, hi);
  return {lo, hi, j0 < ck};
}

// Copies rows [r0, r0 + rows) of a [n, ld] bf16 tensor (columns col0..col0+D) into shared
// rows of stride mma_smem_stride(D); rows at or past n are zero-filled.
template <int D, class Hw, class Elem>
SUITE_MMA_FN void load_tile_async(Elem* dst, const Elem* src, std::int64_t ld, std::int64_t col0,
                                  std::int64_t r0, int rows, std::int64_t n, int tid) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kStride = mma_smem_stride(D);
  for (int idx = tid; idx < rows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool in = r0 + r < n;
    const Elem* g = in ? src + (r0 + r) * ld + col0 + c * 8 : src;
    Hw::cp_async16(dst + r * kStride + c * 8, g, in ? 16 : 0);
  }
}

// Thread `tid` of block (bx, by) = (query tile, head). smem: smem_bytes<D>() bytes, 16-aligned.
template <int D, class Hw>
SUITE_MMA_FN void block(const AttentionParams& p, float scale_log2,
                        const typename Hw::Elem* __restrict__ q,
                        const typename Hw::Elem* __restrict__ k,
                        const typename Hw::Elem* __restrict__ v,
                        const std::int64_t* __restrict__ q_pos,
                        const std::int64_t* __restrict__ k_pos, typename Hw::Elem* __restrict__ o,
                        float* __restrict__ lse, unsigned char* smem, int tid, int bx, int by) {
  using Elem = typename Hw::Elem;
  constexpr int kStride = mma_smem_stride(D);
  constexpr int kSteps = D / 16;  // k-steps of S = Q K^T
  constexpr int kNd = D / 8;      // n-blocks of O
  constexpr int kNk = kBc / 8;    // n-blocks of S
  // Shared layout: Q [kBr rows], K stage 0, K stage 1, V stage 0, V stage 1 [kBc rows each],
  // then the warps' largest query positions.
  auto* qs = reinterpret_cast<Elem*>(smem);
  auto k_stage = [&](int st) { return qs + (kBr + st * kBc) * kStride; };
  auto v_stage = [&](int st) { return qs + (kBr + (2 + st) * kBc) * kStride; };
  auto* block_qmax = reinterpret_cast<std::int64_t*>(smem + mma_smem_bytes(D, kBr, kBc));

  const int lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int h = by;
  const int kh = kv_head_for(h, p.heads, p.kv_heads);
  const std::int64_t i0 = static_cast<std::int64_t>(bx) * kBr;
  const std::int64_t w0 = i0 + warp * 16;  // this warp's first query row
  const std::int64_t n_tiles = tile_count(p.ck, kBc);

  // Q tile: issue its copy first (group 0).
  load_tile_async<D, Hw>(qs, q, p.ld_q, static_cast<std::int64_t>(h) * D, i0, kBr, p.cq, tid);
  Hw::cp_async_commit();

  // Positions of this thread's two rows and the warp's / block's query range.
  const std::int64_t row0 = w0 + g, row1 = w0 + g + 8;
  const bool valid0 = row0 < p.cq, valid1 = row1 < p.cq;
  const std::int64_t qp0 = valid0 ? q_pos[row0] : INT64_MIN;
  const std::int64_t qp1 = valid1 ? q_pos[row1] : INT64_MIN;
  std::int64_t wq_min = INT64_MAX, wq_max = INT64_MIN;  // over the warp's valid rows
  if (valid0) widen(wq_min, wq_max, qp0, qp0);
  if (valid1) widen(wq_min, wq_max, qp1, qp1);
  warp_range<Hw>(wq_min, wq_max);
  const bool warp_any = w0 < p.cq;
  if (lane == 0) block_qmax[warp] = wq_max;
  Hw::sync_threads();
  std::int64_t bq_max = INT64_MIN;
  SUITE_UNROLL
  for (int w = 0; w < kWarps; ++w)
    bq_max = block_qmax[w] > bq_max ? block_qmax[w] : bq_max;

  // The next key tile with any key visible to any query of the block (uniform: every warp
  // computes the same ranges from the same positions).
  auto next_visible = [&](std::int64_t from, KeyRange& range) {
    for (std::int64_t j = from; j < n_tiles; ++j) {
      range = key_range<Hw>(k_pos, p.ck, j * kBc, lane);
      if (tile_pair_visible(p.causal, bq_max, range.lo)) return j;
    }
    return n_tiles;
  };
  auto load_kv = [&](std::int64_t j, int stage) {
    const std::int64_t col0 = static_cast<std::int64_t>(kh) * D;
    load_tile_async<D, Hw>(k_stage(stage), k, p.ld_k, col0, j * kBc, kBc, p.ck, tid);
    load_tile_async<D, Hw>(v_stage(stage), v, p.ld_v, col0, j * kBc, kBc, p.ck, tid);
  };

  KeyRange cur_range{}, next_range{};
  std::int64_t cur = next_visible(0, cur_range);
  if (cur < n_tiles) load_kv(cur, 0);
  Hw::cp_async_commit();  // group 1 (possibly empty)

  // Q fragments into registers once the Q copy has landed.
  Hw::template cp_async_wait<1>();
  Hw::sync_threads();
  unsigned qf[kSteps][4];
  SUITE_UNROLL
  for (int kk = 0; kk < kSteps; ++kk) {
    SUITE_UNROLL
    for (int r = 0; r < 4; ++r) {
      const FragCoord c = mma_a_coord(lane, r);
      qf[kk][r] = Hw::lds32(qs + (warp * 16 + c.row) * kStride + kk * 16 + c.col);
    }
  }

  float acc[kNd][4];
  SUITE_UNROLL
  for (int n = 0; n < kNd; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running max per row (log2 units)
  float l[2] = {0.0f, 0.0f};            // this thread's share of the running sum

  int stage = 0;
  while (cur < n_tiles) {
    const std::int64_t nxt = next_visible(cur + 1, next_range);
    if (nxt < n_tiles) load_kv(nxt, stage ^ 1);
    Hw::cp_async_commit();
    Hw::template cp_async_wait<1>();  // everything but the group just committed: `cur` is in
    Hw::sync_threads();

    const std::int64_t j0 = cur * kBc;
    const TileVisibility vis = classify_tile(p.causal, wq_min, wq_max, cur_range.lo, cur_range.hi,
                                             warp_any, cur_range.any, j0 + kBc <= p.ck);
    if (vis != TileVisibility::none) {
      const Elem* kt = k_stage(stage);
      const Elem* vt = v_stage(stage);
      float s[kNk][4];
      SUITE_UNROLL
      for (int n = 0; n < kNk; ++n)
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      SUITE_UNROLL
      for (int kk = 0; kk < kSteps; ++kk) {
        SUITE_UNROLL
        for (int n = 0; n < kNk; ++n) {
          const FragCoord b0 = mma_b_coord(lane, 0), b1 = mma_b_coord(lane, 1);
          // B(k, n) = K[key n][feature k]: a feature pair of one key row.
          const unsigned r0 = Hw::lds32(kt + (n * 8 + b0.col) * kStride + kk * 16 + b0.row);
          const unsigned r1 = Hw::lds32(kt + (n * 8 + b1.col) * kStride + kk * 16 + b1.row);
          Hw::mma(s[n], qf[kk], r0, r1);
        }
      }
      // Scale to log2 units and mask.
      SUITE_UNROLL
      for (int n = 0; n < kNk; ++n) {
        SUITE_UNROLL
        for (int e = 0; e < 4; ++e) {
          float x = s[n][e] * scale_log2;
          if (vis == TileVisibility::partial) {
            const FragCoord c = mma_c_coord(lane, e);
            const std::int64_t kj = j0 + n * 8 + c.col;
            const bool row_ok = e < 2 ? valid0 : valid1;
            const bool seen =
                row_ok && kj < p.ck && key_visible(p.causal, e < 2 ? qp0 : qp1, k_pos[kj]);
            x = seen ? x : -INFINITY;
          }
          s[n][e] = x;
        }
      }
      // Online softmax: rows g (elements 0, 1) and g + 8 (elements 2, 3); the four lanes of a
      // quad hold one row between them.
      SUITE_UNROLL
      for (int r = 0; r < 2; ++r) {
        float mt = -INFINITY;
        SUITE_UNROLL
        for (int n = 0; n < kNk; ++n)
          mt = fmaxf(mt, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        mt = fmaxf(mt, Hw::shfl_xor(mt, 1));
        mt = fmaxf(mt, Hw::shfl_xor(mt, 2));
        const float m_new = fmaxf(m[r], mt);
        // Nothing visible yet: subtract 0 so exp2 gives 0, not NaN.
        const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
        const float corr = exp2f(m[r] - m_ref);
        float sum = 0.0f;
        SUITE_UNROLL
        for (int n = 0; n < kNk; ++n) {
          s[n][2 * r] = exp2f(s[n][2 * r] - m_ref);
          s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - m_ref);
          sum += s[n][2 * r] + s[n][2 * r + 1];
        }
        l[r] = l[r] * corr + sum;
        m[r] = m_new;
        SUITE_UNROLL
        for (int n = 0; n < kNd; ++n) {
          acc[n][2 * r] *= corr;
          acc[n][2 * r + 1] *= corr;
        }
      }
      // O += P V: the S accumulators of key blocks 2kk and 2kk+1 are exactly the A fragment
      // of keys 16kk..16kk+15 (tile_mask.hpp's coordinates; tested on the CPU).
      SUITE_UNROLL
      for (int kk = 0; kk < kBc / 16; ++kk) {
        const unsigned a[4] = {Hw::pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                               Hw::pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                               Hw::pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               Hw::pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const int mtx = lane / 8, mrow = lane % 8;
        SUITE_UNROLL
        for (int n = 0; n < kNd; n += 2) {
          // Matrices: (keys +0..7, dims n), (keys +8..15, dims n), the same for dims n + 1.
          const int key = kk * 16 + (mtx & 1) * 8 + mrow;
          const int dim = (n + (mtx >> 1)) * 8;
          unsigned b[4];
          Hw::ldmatrix_x4_trans(b, vt + key * kStride + dim);
          Hw::mma(acc[n], a, b[0], b[1]);
          Hw::mma(acc[n + 1], a, b[2], b[3]);
        }
      }
    }
    Hw::sync_threads();  // every warp is done with `stage` before it is refilled
    stage ^= 1;
    cur = nxt;
    cur_range = next_range;
  }
  Hw::template cp_async_wait<0>();

  // Finish: full row sums across the quad, normalise, store bf16 pairs and lse.
  SUITE_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += Hw::shfl_xor(l[r], 1);
    l[r] += Hw::shfl_xor(l[r], 2);
  }
  SUITE_UNROLL
  for (int r = 0; r < 2; ++r) {
    const std::int64_t row = r == 0 ? row0 : row1;
    if (row >= p.cq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    Elem* orow = o + row * p.ld_o + static_cast<std::int64_t>(h) * D;
    SUITE_UNROLL
    for (int n = 0; n < kNd; ++n) {
      const FragCoord c = mma_c_coord(lane, 2 * r);
      Hw::store32(orow + n * 8 + c.col,
                  Hw::pack_bf16(acc[n][2 * r] * inv, acc[n][2 * r + 1] * inv));
    }
    if (t == 0)
      Hw::store_lse(lse + static_cast<std::int64_t>(h) * p.cq + row,
                    l[r] > 0.0f ? m[r] * kLn2 + logf(l[r]) : -INFINITY);
  }
}

}  // namespace suite::kernels::flash_mma

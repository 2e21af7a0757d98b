// The body of the suite's CUDA attention backward kernel (attention_backward.cu): what one
// thread of one block does, written against a hardware policy `Hw` that supplies the two
// primitives it needs, a block barrier and an fp32 atomic add. On the GPU, Hw is
// __syncthreads / atomicAdd; on the CPU, the tests' SIMT emulator runs this same source with
// a barrier between fibers and a plain +=, so the indexing, staging, masking and reductions
// the GPU runs are checked against the double-precision reference on every build.
//
// FlashAttention-2's backward from the FINAL lse and delta (METHODS.md section 5), the simple
// way: no tensor cores, fp32 arithmetic. One block per (64-query tile, head), one thread per
// query row. The block's Q and dO rows are staged once in shared memory; then per tile of 32
// keys (K, V staged in shared memory):
//   1. each thread, for its own row (row_tile): s_j = q . k_j, p_j = exp(scale s_j - lse)
//      (0 where hidden or where the query sees no key at all), dp_j = dO . v_j,
//      ds_j = p_j (dp_j - delta); p and ds go to the tile's P and dS columns in shared
//      memory, and dq += ds_j k_j stays in registers (each (row, head) has one owner: dq is
//      added into the accumulator at the end without atomics);
//   2. barrier; each thread takes feature columns c (column_tile) and reduces over the
//      block's 64 rows: dv_j[c] = sum_i P_ji dO_i[c], dk_j[c] = scale sum_i dS_ji q_i[c],
//      added into the accumulators with one atomic per (key, feature, block): other query
//      tiles, and with GQA the other heads of the group, add into the same dk, dv rows.
// Tile pairs in which no key is visible to any query of the block are skipped.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/attention/attention_index.hpp"
#include "kernels/core/device_storage.hpp"

#if defined(__CUDACC__)
#define SUITE_BWD_FN __device__ __forceinline__
#define SUITE_BWD_UNROLL _Pragma("unroll")
#else
#define SUITE_BWD_FN inline
#define SUITE_BWD_UNROLL
#endif

namespace suite::kernels::attn_bwd {

constexpr int kBr = 64;  // query rows = threads per block
constexpr int kBc = 32;  // keys per shared-memory tile

// Row stride (elements) of the staged Q and dO tiles: one 4-byte word of padding per row, so
// that thread t reading element c of its own row t hits bank (t * words_per_row + c') mod 32
// with an odd words_per_row: the 32 lanes of a warp on 32 distinct banks.
template <class S, int D>
constexpr int row_stride() {
  return D + static_cast<int>(4 / sizeof(S));
}

// Byte offsets into the block's dynamic shared memory (8-byte types first, so every array is
// aligned for its type): key positions [kBc], query positions [kBr], P and dS [kBc][kBr]
// (fp32, key-major: a thread writes its own column), Q and dO [kBr][row_stride] and
// K and V [kBc][D] in the storage type S.
template <class S, int D>
struct SmemLayout {
  static constexpr std::size_t kpos = 0;
  static constexpr std::size_t qpos = kpos + sizeof(std::int64_t) * kBc;
  static constexpr std::size_t p = qpos + sizeof(std::int64_t) * kBr;
  static constexpr std::size_t ds = p + sizeof(float) * kBc * kBr;
  static constexpr std::size_t q = ds + sizeof(float) * kBc * kBr;
  static constexpr std::size_t d_o = q + sizeof(S) * kBr * row_stride<S, D>();
  static constexpr std::size_t k = d_o + sizeof(S) * kBr * row_stride<S, D>();
  static constexpr std::size_t v = k + sizeof(S) * kBc * D;
  static constexpr std::size_t bytes = v + sizeof(S) * kBc * D;
};

// What one query row sees of one staged key tile.
struct RowState {
  bool active;       // a real row (not padding) whose query sees some key (lse > -inf)
  std::int64_t pos;  // its global position
  float lse, delta;  // its final statistics
};

// Step 1 for one query row against one key tile of nk valid keys (the rest zero padding):
// P[j][col] = p_j and dS[j][col] = ds_j (both 0 where key j is hidden or the row inactive),
// and dq[c] += ds_j k_j[c] (unscaled; the caller scales once at the end). q_row and do_row
// are the row's staged Q and dO, k_tile / v_tile the staged keys [kBc][D], k_pos their
// positions; P and dS have row stride kBr.
template <class S, int D>
SUITE_BWD_FN void row_tile(const RowState& r, bool causal, float scale, const S* q_row,
                           const S* do_row, const S* k_tile, const S* v_tile,
                           const std::int64_t* k_pos, int nk, float* P, float* dS, int col,
                           float (&dq)[D]) {
  float x[kBc];
  SUITE_BWD_UNROLL
  for (int j = 0; j < kBc; ++j)
    x[j] = 0.0f;
  // s_j = q . k_j: q element c once, the keys' element c broadcast from shared memory.
  for (int c = 0; c < D; ++c) {
    const float qc = load_f32(q_row, c);
    SUITE_BWD_UNROLL
    for (int j = 0; j < kBc; ++j)
      x[j] += qc * load_f32(k_tile, j * D + c);
  }
  SUITE_BWD_UNROLL
  for (int j = 0; j < kBc; ++j) {
    const bool seen = r.active && j < nk && key_visible(causal, r.pos, k_pos[j]);
    // Hidden pairs never reach exp: lse may be -inf only for inactive rows, never subtracted.
    P[j * kBr + col] = seen ? expf(x[j] * scale - r.lse) : 0.0f;
    x[j] = 0.0f;
  }
  // dp_j = dO . v_j.
  for (int c = 0; c < D; ++c) {
    const float gc = load_f32(do_row, c);
    SUITE_BWD_UNROLL
    for (int j = 0; j < kBc; ++j)
      x[j] += gc * load_f32(v_tile, j * D + c);
  }
  SUITE_BWD_UNROLL
  for (int j = 0; j < kBc; ++j) {
    const float pj = P[j * kBr + col];  // this thread's own column: no barrier needed
    dS[j * kBr + col] = pj != 0.0f ? pj * (x[j] - r.delta) : 0.0f;
  }
  // dq += ds_j k_j.
  for (int j = 0; j < nk; ++j) {
    const float ds = dS[j * kBr + col];
    if (ds == 0.0f) continue;  // hidden key (or an exact zero): nothing to add
    SUITE_BWD_UNROLL
    for (int c = 0; c < D; ++c)
      dq[c] += ds * load_f32(k_tile, j * D + c);
  }
}

// Step 2 for feature column c of one key tile: dv_j[c] = sum_i P[j][i] dO_i[c] and
// dk_j[c] = scale sum_i dS[j][i] q_i[c] over the block's kBr rows (padding rows hold
// p = ds = 0), added through Hw::atomic_add into dv_col[j * ld_v] and dk_col[j * ld_k] for
// the tile's nk valid keys (dk_col, dv_col: the accumulators at the tile's first key, this
// head's K/V head, column c).
template <class S, int D, class Hw>
SUITE_BWD_FN void column_tile(int c, float scale, const float* P, const float* dS, const S* q_tile,
                              const S* do_tile, int nk, float* dk_col, std::int64_t ld_k,
                              float* dv_col, std::int64_t ld_v) {
  constexpr int kStride = row_stride<S, D>();
  float acc[kBc];
  SUITE_BWD_UNROLL
  for (int j = 0; j < kBc; ++j)
    acc[j] = 0.0f;
  for (int i = 0; i < kBr; ++i) {
    const float g = load_f32(do_tile, i * kStride + c);
    SUITE_BWD_UNROLL
    for (int j = 0; j < kBc; ++j)
      acc[j] += P[j * kBr + i] * g;  // P[j][i]: the same word for every thread (broadcast)
  }
  SUITE_BWD_UNROLL
  for (int j = 0; j < kBc; ++j) {
    if (j < nk) Hw::atomic_add(dv_col + j * ld_v, acc[j]);
    acc[j] = 0.0f;
  }
  for (int i = 0; i < kBr; ++i) {
    const float qv = load_f32(q_tile, i * kStride + c);
    SUITE_BWD_UNROLL
    for (int j = 0; j < kBc; ++j)
      acc[j] += dS[j * kBr + i] * qv;
  }
  SUITE_BWD_UNROLL
  for (int j = 0; j < kBc; ++j) {
    if (j < nk) Hw::atomic_add(dk_col + j * ld_k, scale * acc[j]);
  }
}

// Thread t of the block for (query_tile, head h). q, k, v, d_o in the storage type S with the
// row strides of p (d_o: p.ld_o); lse, delta [heads, cq]; dq (p.ld_q), dk (p.ld_k), dv (p.ld_v)
// fp32 accumulators that this block ADDS into. smem: SmemLayout<S, D>::bytes bytes.
template <class S, int D, class Hw>
SUITE_BWD_FN void block(const AttentionParams& p, const S* __restrict__ q, const S* __restrict__ k,
                        const S* __restrict__ v, const S* __restrict__ d_o,
                        const float* __restrict__ lse, const float* __restrict__ delta,
                        const std::int64_t* __restrict__ q_pos,
                        const std::int64_t* __restrict__ k_pos, float* __restrict__ dq,
                        float* __restrict__ dk, float* __restrict__ dv, unsigned char* smem, int t,
                        int query_tile, int h) {
  using L = SmemLayout<S, D>;
  constexpr int kStride = row_stride<S, D>();
  auto* kpos_s = reinterpret_cast<std::int64_t*>(smem + L::kpos);
  auto* qpos_s = reinterpret_cast<std::int64_t*>(smem + L::qpos);
  auto* P = reinterpret_cast<float*>(smem + L::p);
  auto* dS = reinterpret_cast<float*>(smem + L::ds);
  auto* qs = reinterpret_cast<S*>(smem + L::q);
  auto* dos = reinterpret_cast<S*>(smem + L::d_o);
  auto* ks = reinterpret_cast<S*>(smem + L::k);
  auto* vs = reinterpret_cast<S*>(smem + L::v);

  const int kh = kv_head_for(h, p.heads, p.kv_heads);
  const std::int64_t hd = static_cast<std::int64_t>(h) * D, khd = static_cast<std::int64_t>(kh) * D;
  const std::int64_t i0 = static_cast<std::int64_t>(query_tile) * kBr;
  const std::int64_t row = i0 + t;
  const bool row_valid = row < p.cq;
  const float scale = static_cast<float>(p.softmax_scale);

  // Stage the tile's Q and dO rows (zeros past the end of the block).
  for (int idx = t; idx < kBr * D; idx += kBr) {
    const int r = idx / D, c = idx % D;
    const std::int64_t gi = i0 + r;
    qs[r * kStride + c] = gi < p.cq ? q[gi * p.ld_q + hd + c] : S{};
    dos[r * kStride + c] = gi < p.cq ? d_o[gi * p.ld_o + hd + c] : S{};
  }
  RowState rs{false, INT64_MIN, 0.0f, 0.0f};
  if (row_valid) {
    rs.pos = q_pos[row];
    rs.lse = lse[static_cast<std::int64_t>(h) * p.cq + row];
    rs.delta = delta[static_cast<std::int64_t>(h) * p.cq + row];
    rs.active = rs.lse != -INFINITY;
  }
  qpos_s[t] = rs.pos;
  Hw::sync_threads();
  std::int64_t q_max = INT64_MIN;  // block-uniform: decides tile skipping for every thread
  for (int r = 0; r < kBr; ++r)
    q_max = qpos_s[r] > q_max ? qpos_s[r] : q_max;

  float acc[D];
  SUITE_BWD_UNROLL
  for (int c = 0; c < D; ++c)
    acc[c] = 0.0f;

  for (std::int64_t j0 = 0; j0 < p.ck; j0 += kBc) {
    const int nk = static_cast<int>(p.ck - j0 < kBc ? p.ck - j0 : kBc);
    Hw::sync_threads();  // the previous tile's K, V, P and dS fully consumed
    for (int idx = t; idx < kBc * D; idx += kBr) {
      const int r = idx / D, c = idx % D;
      const bool in = r < nk;
      ks[idx] = in ? k[(j0 + r) * p.ld_k + khd + c] : S{};
      vs[idx] = in ? v[(j0 + r) * p.ld_v + khd + c] : S{};
    }
    if (t < kBc) kpos_s[t] = t < nk ? k_pos[j0 + t] : INT64_MAX;
    Hw::sync_threads();
    std::int64_t k_min = INT64_MAX;
    for (int j = 0; j < nk; ++j)
      k_min = kpos_s[j] < k_min ? kpos_s[j] : k_min;
    if (!tile_pair_visible(p.causal, q_max, k_min)) continue;  // uniform across the block

    row_tile<S, D>(rs, p.causal, scale, qs + t * kStride, dos + t * kStride, ks, vs, kpos_s, nk, P,
                   dS, t, acc);
    Hw::sync_threads();  // every row's P and dS columns written
    for (int c = t; c < D; c += kBr)
      column_tile<S, D, Hw>(c, scale, P, dS, qs, dos, nk, dk + j0 * p.ld_k + khd + c, p.ld_k,
                            dv + j0 * p.ld_v + khd + c, p.ld_v);
  }

  if (!rs.active) return;  // a query that sees no key contributes nothing
  float* dq_row = dq + row * p.ld_q + hd;
  SUITE_BWD_UNROLL
  for (int c = 0; c < D; ++c)
    dq_row[c] += scale * acc[c];
}

}  // namespace suite::kernels::attn_bwd

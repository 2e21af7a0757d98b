// FlashAttention-2-style forward for bf16 on sm_80+ (A100, H100/H200): tensor cores through
// mma.sync m16n8k16 (bf16 in, fp32 accumulate).
//
// One block per (64-query tile, head), four warps of 16 query rows each. The block's Q tile
// is staged once through shared memory into registers (A fragments); K and V tiles of 64 keys
// are double-buffered in shared memory with cp.async, so the next tile loads while this one
// computes. Per tile each warp computes S = Q K^T (16 x 64, fp32 in registers), masks it from
// the global positions where the tile needs a mask, updates its running row max and sum
// (online softmax, base-2), rounds P to bf16 and accumulates O += P V (V fragments through
// ldmatrix.trans). Tile pairs without a visible key are skipped (not even loaded); tiles that
// are fully visible are computed without a mask. lse = ln(sum exp(scaled scores)), fp32.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/attention/tile_mask.hpp"
#include "kernels/core/cuda_check.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kBr = 16 * kWarps;  // query rows per block
constexpr int kBc = 64;           // keys per tile
constexpr int kThreads = 32 * kWarps;
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kLog2e = 1.442695040888963407f;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; src_bytes = 0 writes zeros (rows past the end).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// c += a b for one m16n8k16 tile (a: 4 registers of bf16 pairs, b: 2).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8x8 bf16 matrices, transposed: lanes 8m..8m+7 give the row addresses of matrix m;
// r[m] receives, for lane (g, t), elements (2t, g) and (2t + 1, g) of matrix m.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row_addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
#endif
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const unsigned*>(&v);
}

__device__ __forceinline__ unsigned lds32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

struct KeyRange {
  std::int64_t lo, hi;
  bool any;
};

// Folds x into [lo, hi].
__device__ __forceinline__ void widen(std::int64_t& lo, std::int64_t& hi, std::int64_t x_lo,
                                      std::int64_t x_hi) {
  lo = x_lo < lo ? x_lo : lo;
  hi = x_hi > hi ? x_hi : hi;
}

// [lo, hi] over the whole warp (every lane gets the result).
__device__ __forceinline__ void warp_range(std::int64_t& lo, std::int64_t& hi) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    widen(lo, hi, __shfl_xor_sync(0xffffffffu, lo, off), __shfl_xor_sync(0xffffffffu, hi, off));
}

// Min and max position of key tile [j0, j0 + kBc) (valid keys only), computed by one warp.
__device__ __forceinline__ KeyRange key_range(const std::int64_t* __restrict__ k_pos,
                                              std::int64_t ck, std::int64_t j0, int lane) {
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int r = lane; r < kBc; r += 32) {
    if (j0 + r < ck) widen(lo, hi, k_pos[j0 + r], k_pos[j0 + r]);
  }
  warp_range(lo, hi);
  return {lo, hi, j0 < ck};
}

// Copies rows [r0, r0 + rows) of a [n, ld] bf16 tensor (columns col0..col0+D) into shared
// rows of stride mma_smem_stride(D); rows at or past n are zero-filled.
template <int D>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* dst, const __nv_bfloat16* src,
                                                std::int64_t ld, std::int64_t col0, std::int64_t r0,
                                                int rows, std::int64_t n) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kStride = mma_smem_stride(D);
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool in = r0 + r < n;
    const __nv_bfloat16* g = in ? src + (r0 + r) * ld + col0 + c * 8 : src;
    cp_async16(dst + r * kStride + c * 8, g, in ? 16 : 0);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_mma_kernel(AttentionParams p, float scale_log2, const __nv_bfloat16* __restrict__ q,
                     const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
                     const std::int64_t* __restrict__ q_pos, const std::int64_t* __restrict__ k_pos,
                     __nv_bfloat16* __restrict__ o, float* __restrict__ lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kStride = mma_smem_stride(D);
  constexpr int kSteps = D / 16;  // k-steps of S = Q K^T
  constexpr int kNd = D / 8;      // n-blocks of O
  constexpr int kNk = kBc / 8;    // n-blocks of S
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Shared layout: Q [kBr rows], K stage 0, K stage 1, V stage 0, V stage 1 [kBc rows each].
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  auto k_stage = [&](int st) { return qs + (kBr + st * kBc) * kStride; };
  auto v_stage = [&](int st) { return qs + (kBr + (2 + st) * kBc) * kStride; };
  __shared__ std::int64_t block_qmax[kWarps];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int h = blockIdx.y;
  const int kh = kv_head_for(h, p.heads, p.kv_heads);
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kBr;
  const std::int64_t w0 = i0 + warp * 16;  // this warp's first query row
  const std::int64_t n_tiles = tile_count(p.ck, kBc);

  // Q tile: issue its copy first (group 0).
  load_tile_async<D>(qs, q, p.ld_q, static_cast<std::int64_t>(h) * D, i0, kBr, p.cq);
  cp_async_commit();

  // Positions of this thread's two rows and the warp's / block's query range.
  const std::int64_t row0 = w0 + g, row1 = w0 + g + 8;
  const bool valid0 = row0 < p.cq, valid1 = row1 < p.cq;
  const std::int64_t qp0 = valid0 ? q_pos[row0] : INT64_MIN;
  const std::int64_t qp1 = valid1 ? q_pos[row1] : INT64_MIN;
  std::int64_t wq_min = INT64_MAX, wq_max = INT64_MIN;  // over the warp's valid rows
  if (valid0) widen(wq_min, wq_max, qp0, qp0);
  if (valid1) widen(wq_min, wq_max, qp1, qp1);
  warp_range(wq_min, wq_max);
  const bool warp_any = w0 < p.cq;
  if (lane == 0) block_qmax[warp] = wq_max;
  __syncthreads();
  std::int64_t bq_max = INT64_MIN;
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    bq_max = block_qmax[w] > bq_max ? block_qmax[w] : bq_max;

  // The next key tile with any key visible to any query of the block (uniform: every warp
  // computes the same ranges from the same positions).
  auto next_visible = [&](std::int64_t from, KeyRange& range) {
    for (std::int64_t j = from; j < n_tiles; ++j) {
      range = key_range(k_pos, p.ck, j * kBc, lane);
      if (tile_pair_visible(p.causal, bq_max, range.lo)) return j;
    }
    return n_tiles;
  };
  auto load_kv = [&](std::int64_t j, int stage) {
    const std::int64_t col0 = static_cast<std::int64_t>(kh) * D;
    load_tile_async<D>(k_stage(stage), k, p.ld_k, col0, j * kBc, kBc, p.ck);
    load_tile_async<D>(v_stage(stage), v, p.ld_v, col0, j * kBc, kBc, p.ck);
  };

  KeyRange cur_range{}, next_range{};
  std::int64_t cur = next_visible(0, cur_range);
  if (cur < n_tiles) load_kv(cur, 0);
  cp_async_commit();  // group 1 (possibly empty)

  // Q fragments into registers once the Q copy has landed.
  cp_async_wait<1>();
  __syncthreads();
  unsigned qf[kSteps][4];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const FragCoord c = mma_a_coord(lane, r);
      qf[kk][r] = lds32(qs + (warp * 16 + c.row) * kStride + kk * 16 + c.col);
    }
  }

  float acc[kNd][4];
#pragma unroll
  for (int n = 0; n < kNd; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running max per row (log2 units)
  float l[2] = {0.0f, 0.0f};            // this thread's share of the running sum

  int stage = 0;
  while (cur < n_tiles) {
    const std::int64_t nxt = next_visible(cur + 1, next_range);
    if (nxt < n_tiles) load_kv(nxt, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the group just committed: tile `cur` is in
    __syncthreads();

    const std::int64_t j0 = cur * kBc;
    const TileVisibility vis = classify_tile(p.causal, wq_min, wq_max, cur_range.lo, cur_range.hi,
                                             warp_any, cur_range.any, j0 + kBc <= p.ck);
    if (vis != TileVisibility::none) {
      const __nv_bfloat16* kt = k_stage(stage);
      const __nv_bfloat16* vt = v_stage(stage);
      float s[kNk][4];
#pragma unroll
      for (int n = 0; n < kNk; ++n)
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
        for (int n = 0; n < kNk; ++n) {
          const FragCoord b0 = mma_b_coord(lane, 0), b1 = mma_b_coord(lane, 1);
          // B(k, n) = K[key n][feature k]: a feature pair of one key row.
          const unsigned r0 = lds32(kt + (n * 8 + b0.col) * kStride + kk * 16 + b0.row);
          const unsigned r1 = lds32(kt + (n * 8 + b1.col) * kStride + kk * 16 + b1.row);
          mma_bf16(s[n], qf[kk], r0, r1);
        }
      }
      // Scale to log2 units and mask.
#pragma unroll
      for (int n = 0; n < kNk; ++n) {
#pragma unroll
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
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mt = -INFINITY;
#pragma unroll
        for (int n = 0; n < kNk; ++n)
          mt = fmaxf(mt, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float m_new = fmaxf(m[r], mt);
        // Nothing visible yet: subtract 0 so exp2 gives 0, not NaN.
        const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
        const float corr = exp2f(m[r] - m_ref);
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < kNk; ++n) {
          s[n][2 * r] = exp2f(s[n][2 * r] - m_ref);
          s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - m_ref);
          sum += s[n][2 * r] + s[n][2 * r + 1];
        }
        l[r] = l[r] * corr + sum;
        m[r] = m_new;
#pragma unroll
        for (int n = 0; n < kNd; ++n) {
          acc[n][2 * r] *= corr;
          acc[n][2 * r + 1] *= corr;
        }
      }
      // O += P V: the S accumulators of key blocks 2kk and 2kk+1 are exactly the A fragment
      // of keys 16kk..16kk+15 (tile_mask.hpp's coordinates; tested on the CPU).
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        const unsigned a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]),
                               pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                               pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const int mtx = lane / 8, mrow = lane % 8;
#pragma unroll
        for (int n = 0; n < kNd; n += 2) {
          // Matrices: (keys +0..7, dims n), (keys +8..15, dims n), the same for dims n + 1.
          const int key = kk * 16 + (mtx & 1) * 8 + mrow;
          const int dim = (n + (mtx >> 1)) * 8;
          unsigned b[4];
          ldmatrix_x4_trans(b, vt + key * kStride + dim);
          mma_bf16(acc[n], a, b[0], b[1]);
          mma_bf16(acc[n + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with `stage` before it is refilled
    stage ^= 1;
    cur = nxt;
    cur_range = next_range;
  }
  cp_async_wait<0>();

  // Finish: full row sums across the quad, normalise, store bf16 pairs and lse.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const std::int64_t row = r == 0 ? row0 : row1;
    if (row >= p.cq) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    __nv_bfloat16* orow = o + row * p.ld_o + static_cast<std::int64_t>(h) * D;
#pragma unroll
    for (int n = 0; n < kNd; ++n) {
      const FragCoord c = mma_c_coord(lane, 2 * r);
      *reinterpret_cast<unsigned*>(orow + n * 8 + c.col) =
          pack_bf16(acc[n][2 * r] * inv, acc[n][2 * r + 1] * inv);
    }
    if (t == 0)
      lse[static_cast<std::int64_t>(h) * p.cq + row] =
          l[r] > 0.0f ? m[r] * kLn2 + logf(l[r]) : -INFINITY;
  }
#else
  __trap();  // launched only on sm_80+ (checked on the host)
#endif
}

template <int D>
void launch(cudaStream_t stream, const AttentionParams& p, const void* q, const void* k,
            const void* v, const std::int64_t* q_pos, const std::int64_t* k_pos, void* o,
            float* lse) {
  constexpr int smem = mma_smem_bytes(D, kBr, kBc);
  auto* kernel = flash_mma_kernel<D>;
  // Once per device and head dim: the ring launches this kernel many times per step.
  thread_local int opted_in_device = -1;
  int dev = 0;
  SUITE_CUDA_CHECK(cudaGetDevice(&dev));
  if (opted_in_device != dev) {
    SUITE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    opted_in_device = dev;
  }
  const dim3 grid(static_cast<unsigned>(tile_count(p.cq, kBr)), static_cast<unsigned>(p.heads));
  const float scale_log2 = static_cast<float>(p.softmax_scale) * kLog2e;
  kernel<<<grid, kThreads, smem, stream>>>(
      p, scale_log2, static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
      static_cast<const __nv_bfloat16*>(v), q_pos, k_pos, static_cast<__nv_bfloat16*>(o), lse);
  SUITE_CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

// Compute capability of the current device, major * 10 + minor (asked once per device).
int current_sm() {
  thread_local int cached_device = -1, cached_sm = 0;
  int dev = 0;
  SUITE_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev == cached_device) return cached_sm;
  int major = 0, minor = 0;
  SUITE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  SUITE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  cached_device = dev;
  cached_sm = major * 10 + minor;
  return cached_sm;
}

}  // namespace

bool attention_forward_mma_applicable(const AttentionParams& p, const void* q, const void* k,
                                      const void* v, const void* o) {
  for (std::int64_t ld : {p.ld_q, p.ld_k, p.ld_v, p.ld_o}) {
    if (ld % 8 != 0) return false;
  }
  if (!(aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o))) return false;
  return current_sm() >= 80;
}

void attention_forward_mma(cudaStream_t stream, const AttentionParams& p, const void* q,
                           const void* k, const void* v, const std::int64_t* q_pos,
                           const std::int64_t* k_pos, void* o, float* lse) {
  validate_attention(p);
  if (p.cq == 0) return;
  if (p.heads > 65535) throw std::invalid_argument("cuda::attention_forward_mma: heads > 65535");
  if (tile_count(p.cq, kBr) > 2147483647)
    throw std::invalid_argument("cuda::attention_forward_mma: too many queries");
  if (p.head_dim == 64) {
    launch<64>(stream, p, q, k, v, q_pos, k_pos, o, lse);
  } else {
    launch<128>(stream, p, q, k, v, q_pos, k_pos, o, lse);
  }
}

}  // namespace suite::kernels::cuda

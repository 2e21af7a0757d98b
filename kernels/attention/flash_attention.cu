// Conservative flash-style attention forward: one thread per query row, kBr rows per block,
// one block per (query tile, head). Per K/V tile (kBc keys, staged in shared memory as fp32)
// each thread computes its kBc scores in registers, updates its running max / sum (online
// softmax, base-2 exponentials) and accumulates P V into a register-resident output row.
// No tensor cores: the fp32 path, and bf16 where the tensor-core kernel
// (flash_attention_mma.cu) does not apply.
#include <cstdint>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kBr = 64;  // query rows (= threads) per block
constexpr int kBc = 32;  // keys per shared-memory tile
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kLog2e = 1.442695040888963407f;

// Shared layout (floats): Q [kBr][D+1] (padded: thread t reads row t, conflict-free),
// K [kBc][D], V [kBc][D] (all threads read the same element: broadcast), P [kBc][kBr].
template <int D>
constexpr std::size_t smem_bytes() {
  return sizeof(float) * (kBr * (D + 1) + 2 * kBc * D + kBc * kBr) +
         sizeof(std::int64_t) * (kBc + kBr);
}

template <class S, int D>
__global__ void __launch_bounds__(kBr)
    flash_forward_kernel(AttentionParams p, float scale_log2, const S* __restrict__ q,
                         const S* __restrict__ k, const S* __restrict__ v,
                         const std::int64_t* __restrict__ q_pos,
                         const std::int64_t* __restrict__ k_pos, S* __restrict__ o,
                         float* __restrict__ lse) {
  extern __shared__ float smem[];
  float* qs = smem;
  float* ks = qs + kBr * (D + 1);
  float* vs = ks + kBc * D;
  float* ps = vs + kBc * D;
  auto* kpos_s = reinterpret_cast<std::int64_t*>(ps + kBc * kBr);
  std::int64_t* qpos_s = kpos_s + kBc;

  const int t = threadIdx.x;
  const int h = blockIdx.y;
  const int kh = kv_head_for(h, p.heads, p.kv_heads);
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kBr;
  const std::int64_t row = i0 + t;
  const bool row_valid = row < p.cq;

  for (int idx = t; idx < kBr * D; idx += kBr) {
    const int r = idx / D, c = idx % D;
    const std::int64_t gi = i0 + r;
    qs[r * (D + 1) + c] = gi < p.cq ? load_f32(q, gi * p.ld_q + h * D + c) : 0.0f;
  }
  const std::int64_t my_pos = row_valid ? q_pos[row] : INT64_MIN;
  qpos_s[t] = my_pos;
  __syncthreads();
  std::int64_t q_max = INT64_MIN;  // block-uniform: decides tile skipping for all threads
  for (int r = 0; r < kBr; ++r)
    q_max = qpos_s[r] > q_max ? qpos_s[r] : q_max;

  float acc[D];
#pragma unroll
  for (int c = 0; c < D; ++c)
    acc[c] = 0.0f;
  float m = -INFINITY;  // running max, log2 units
  float l = 0.0f;       // running sum of 2^(s - m)

  for (std::int64_t j0 = 0; j0 < p.ck; j0 += kBc) {
    const int nk = static_cast<int>(p.ck - j0 < kBc ? p.ck - j0 : kBc);
    __syncthreads();  // previous tile fully consumed before overwriting
    for (int idx = t; idx < kBc * D; idx += kBr) {
      const int r = idx / D, c = idx % D;
      const bool in = r < nk;
      ks[idx] = in ? load_f32(k, (j0 + r) * p.ld_k + kh * D + c) : 0.0f;
      vs[idx] = in ? load_f32(v, (j0 + r) * p.ld_v + kh * D + c) : 0.0f;
    }
    if (t < kBc) kpos_s[t] = t < nk ? k_pos[j0 + t] : INT64_MAX;
    __syncthreads();
    std::int64_t k_min = INT64_MAX;
    for (int j = 0; j < nk; ++j)
      k_min = kpos_s[j] < k_min ? kpos_s[j] : k_min;
    if (!tile_pair_visible(p.causal, q_max, k_min)) continue;  // uniform across the block

    float s[kBc];
#pragma unroll
    for (int j = 0; j < kBc; ++j)
      s[j] = 0.0f;
#pragma unroll 4
    for (int c = 0; c < D; ++c) {
      const float qc = qs[t * (D + 1) + c];
#pragma unroll
      for (int j = 0; j < kBc; ++j)
        s[j] += qc * ks[j * D + c];
    }
    float m_tile = -INFINITY;
#pragma unroll
    for (int j = 0; j < kBc; ++j) {
      const bool vis = row_valid && j < nk && key_visible(p.causal, my_pos, kpos_s[j]);
      s[j] = vis ? s[j] * scale_log2 : -INFINITY;
      m_tile = fmaxf(m_tile, s[j]);
    }
    const float m_new = fmaxf(m, m_tile);
    // While nothing is visible m_new is -inf: subtract 0 instead so exp2 gives 0, not NaN.
    const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
    const float corr = exp2f(m - m_ref);
    float l_tile = 0.0f;
#pragma unroll
    for (int j = 0; j < kBc; ++j) {
      const float pj = exp2f(s[j] - m_ref);
      l_tile += pj;
      ps[j * kBr + t] = pj;  // own column only: no sync needed before reading it back
    }
    l = l * corr + l_tile;
    m = m_new;
#pragma unroll
    for (int c = 0; c < D; ++c)
      acc[c] *= corr;
    for (int j = 0; j < nk; ++j) {
      const float pj = ps[j * kBr + t];
#pragma unroll
      for (int c = 0; c < D; ++c)
        acc[c] += pj * vs[j * D + c];
    }
  }

  if (!row_valid) return;
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int c = 0; c < D; ++c)
    store_f32(o, row * p.ld_o + h * D + c, acc[c] * inv_l);
  lse[h * p.cq + row] = l > 0.0f ? m * kLn2 + logf(l) : -INFINITY;
}

template <class S, int D>
void launch(cudaStream_t stream, const AttentionParams& p, const void* q, const void* k,
            const void* v, const std::int64_t* q_pos, const std::int64_t* k_pos, void* o,
            float* lse) {
  constexpr std::size_t smem = smem_bytes<D>();
  auto* kernel = flash_forward_kernel<S, D>;
  // Above 48 KiB dynamic shared memory must be opted into per kernel.
  SUITE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(tile_count(p.cq, kBr)), static_cast<unsigned>(p.heads));
  const float scale_log2 = static_cast<float>(p.softmax_scale) * kLog2e;
  kernel<<<grid, kBr, smem, stream>>>(p, scale_log2, static_cast<const S*>(q),
                                      static_cast<const S*>(k), static_cast<const S*>(v), q_pos,
                                      k_pos, static_cast<S*>(o), lse);
  SUITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_forward(cudaStream_t stream, DType dtype, const AttentionParams& p, const void* q,
                       const void* k, const void* v, const std::int64_t* q_pos,
                       const std::int64_t* k_pos, void* o, float* lse) {
  validate_attention(p);
  if (p.heads > 65535) throw std::invalid_argument("cuda::attention_forward: heads > 65535");
  if (tile_count(p.cq, kBr) > 2147483647) {
    throw std::invalid_argument("cuda::attention_forward: too many queries");
  }
  if (p.cq == 0) return;
  if (dtype == DType::bf16 && attention_forward_mma_applicable(p, q, k, v, o)) {
    attention_forward_mma(stream, p, q, k, v, q_pos, k_pos, o, lse);
    return;
  }
  dispatch_storage(dtype, "cuda::attention_forward", [&](auto tag) {
    using S = decltype(tag);
    if (p.head_dim == 64) {
      launch<S, 64>(stream, p, q, k, v, q_pos, k_pos, o, lse);
    } else {
      launch<S, 128>(stream, p, q, k, v, q_pos, k_pos, o, lse);
    }
  });
}

}  // namespace suite::kernels::cuda

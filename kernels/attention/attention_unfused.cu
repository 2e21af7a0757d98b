// Unfused attention on the GPU: scores and P V through strided-batched cuBLAS GEMMs, one
// block per score row for the masked softmax and the attention dropout.
#include <cstdint>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/core/block_reduce.cuh"
#include "kernels/core/counter_rng.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"
#include "kernels/gemm/gemm_cuda.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Row r = h * cq + i of the [heads, cq, ck] planes: scores in `probs` become softmax
// probabilities; mask and probs_dropped are filled; lse[h * cq + i] is written.
template <class S>
__global__ void softmax_dropout_kernel(std::int64_t cq, std::int64_t ck, bool causal, float scale,
                                       std::uint32_t threshold, float keep_scale,
                                       std::uint64_t seed, int head_offset,
                                       const std::int64_t* __restrict__ q_pos,
                                       const std::int64_t* __restrict__ k_pos, S* probs,
                                       std::uint8_t* __restrict__ mask,
                                       S* __restrict__ probs_dropped, float* __restrict__ lse) {
  __shared__ float scratch[kThreads / 32];
  const std::int64_t r = blockIdx.x;
  const int h = static_cast<int>(r / cq);
  const std::int64_t qp = q_pos[r - static_cast<std::int64_t>(h) * cq];
  const std::int64_t base = r * ck;

  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < ck; j += blockDim.x) {
    if (key_visible(causal, qp, k_pos[j])) m = fmaxf(m, load_f32(probs, base + j) * scale);
  }
  m = block_max(m, scratch);
  const float m_ref = m == -INFINITY ? 0.0f : m;  // all masked: every weight is 0, no NaN
  float l = 0.0f;
  for (std::int64_t j = threadIdx.x; j < ck; j += blockDim.x) {
    if (key_visible(causal, qp, k_pos[j])) l += expf(load_f32(probs, base + j) * scale - m_ref);
  }
  l = block_sum(l, scratch);
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  for (std::int64_t j = threadIdx.x; j < ck; j += blockDim.x) {
    const bool vis = key_visible(causal, qp, k_pos[j]);
    const float pj = vis ? expf(load_f32(probs, base + j) * scale - m_ref) * inv_l : 0.0f;
    const bool keep = attention_dropout_keep(seed, head_offset + h, qp, k_pos[j], threshold);
    store_f32(probs, base + j, pj);
    mask[base + j] = keep ? 1 : 0;
    store_f32(probs_dropped, base + j, keep ? pj * keep_scale : 0.0f);
  }
  if (threadIdx.x == 0) lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
}

const char* offset(const void* base, std::int64_t elements, std::size_t es) {
  return static_cast<const char*>(base) + elements * static_cast<std::int64_t>(es);
}
char* offset(void* base, std::int64_t elements, std::size_t es) {
  return static_cast<char*>(base) + elements * static_cast<std::int64_t>(es);
}

}  // namespace

void attention_unfused(CublasHandle& handle, cudaStream_t stream, DType dtype,
                       const AttentionParams& p, float dropout_p, std::uint64_t seed,
                       int head_offset, const void* q, const void* k, const void* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, void* probs,
                       std::uint8_t* mask, void* probs_dropped, void* o, float* lse) {
  validate_attention(p);
  const std::uint32_t threshold = dropout_threshold(dropout_p);
  const float keep_scale = 1.0f / (1.0f - dropout_p);
  if (p.heads * p.cq > 2147483647)
    throw std::invalid_argument("cuda::attention_unfused: too many rows");
  if (p.cq == 0) return;
  const std::size_t es = dtype_size(dtype);
  const int d = p.head_dim;
  const int g = p.heads / p.kv_heads;
  const std::int64_t plane = p.cq * p.ck;
  if (p.ck == 0) {  // no keys: o = 0, lse = -inf; skip GEMMs whose leading dimension would be 0
    SUITE_CUDA_CHECK(cudaMemset2DAsync(o, p.ld_o * es, 0, p.heads * d * es, p.cq, stream));
  }
  // Query head b*g + j uses K/V head b: for a fixed j the heads b form a strided batch.
  for (int j = 0; j < g && p.ck > 0; ++j) {
    gemm_strided_batched(handle, stream, dtype, false, true, p.cq, p.ck, d, 1.0f,
                         offset(q, j * d, es), p.ld_q, static_cast<std::int64_t>(g) * d, k, p.ld_k,
                         d, 0.0f, offset(probs, j * plane, es), p.ck, g * plane, p.kv_heads);
  }
  dispatch_storage(dtype, "cuda::attention_unfused", [&](auto tag) {
    using S = decltype(tag);
    softmax_dropout_kernel<S><<<static_cast<unsigned>(p.heads * p.cq), kThreads, 0, stream>>>(
        p.cq, p.ck, p.causal, static_cast<float>(p.softmax_scale), threshold, keep_scale, seed,
        head_offset, q_pos, k_pos, static_cast<S*>(probs), mask, static_cast<S*>(probs_dropped),
        lse);
    SUITE_CUDA_CHECK_LAUNCH();
  });
  for (int j = 0; j < g && p.ck > 0; ++j) {
    gemm_strided_batched(handle, stream, dtype, false, false, p.cq, d, p.ck, 1.0f,
                         offset(probs_dropped, j * plane, es), p.ck, g * plane, v, p.ld_v, d, 0.0f,
                         offset(o, j * d, es), p.ld_o, static_cast<std::int64_t>(g) * d,
                         p.kv_heads);
  }
}

}  // namespace suite::kernels::cuda

// Deliberately plain kernels (grid-stride loops, one thread per token for the router): the
// MoE layer's time is in its GEMMs and all-to-alls; these must be correct first.
#include "kernels/moe/moe_cuda.hpp"

#include <stdexcept>
#include <string>

#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"
#include "kernels/moe/moe_index.hpp"

namespace suite::kernels::moe::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

template <class S>
__global__ void router_kernel(std::int64_t tokens, int experts, int k, const S* logits,
                              const float* logit_bias, const float* select_bias,
                              std::int32_t* chosen, float* gates, float* prob_sum) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       t < tokens; t += stride) {
    const std::int64_t row = t * experts;
    float zmax = -INFINITY;
    for (int e = 0; e < experts; ++e)
      zmax = fmaxf(zmax, load_f32(logits, row + e) + logit_bias[e]);
    float sum = 0;
    for (int e = 0; e < experts; ++e)
      sum += expf(load_f32(logits, row + e) + logit_bias[e] - zmax);
    float best_score[kMaxTopK];
    int best_expert[kMaxTopK];
    int n = 0;
    for (int e = 0; e < experts; ++e) {
      const float p = expf(load_f32(logits, row + e) + logit_bias[e] - zmax) / sum;
      atomicAdd(&prob_sum[e], p);
      topk_insert(p + (select_bias ? select_bias[e] : 0.0f), e, k, n, best_score, best_expert);
    }
    float chosen_p[kMaxTopK];
    float chosen_sum = 0;
    for (int s = 0; s < k; ++s) {
      chosen_p[s] =
          expf(load_f32(logits, row + best_expert[s]) + logit_bias[best_expert[s]] - zmax) / sum;
      chosen_sum += chosen_p[s];
    }
    for (int s = 0; s < k; ++s) {
      chosen[copy_index(t, s, k)] = best_expert[s];
      gates[copy_index(t, s, k)] = chosen_p[s] / chosen_sum;
    }
  }
}

template <class S>
__global__ void gather_rows_kernel(std::int64_t rows, std::int64_t cols, const std::int64_t* src,
                                   const S* in, S* out) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols, c = i - r * cols;
    out[i] = in[src[r] * cols + c];
  }
}

template <class S>
__global__ void combine_kernel(std::int64_t tokens, int k, std::int64_t cols,
                               const std::int64_t* slot_pos, const float* gates, const S* back,
                               S* out) {
  const std::int64_t n = tokens * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t t = i / cols, c = i - t * cols;
    float acc = 0;
    for (int s = 0; s < k; ++s) {
      const std::int64_t pos = slot_pos[copy_index(t, s, k)];
      if (pos >= 0) acc += gates[copy_index(t, s, k)] * load_f32(back, pos * cols + c);
    }
    store_f32(out, i, acc);
  }
}

}  // namespace

void router_topk(cudaStream_t stream, DType dtype, std::int64_t tokens, int experts, int k,
                 const void* logits, const float* logit_bias, const float* select_bias,
                 std::int32_t* chosen, float* gates, float* prob_sum) {
  if (k < 1 || k > experts || k > kMaxTopK)
    throw std::invalid_argument("cuda::router_topk: k must be in [1, min(experts, " +
                                std::to_string(kMaxTopK) + ")]");
  if (tokens <= 0) return;
  dispatch_storage(dtype, "moe::cuda::router_topk", [&](auto tag) {
    using S = decltype(tag);
    router_kernel<S><<<blocks_for(tokens), kThreads, 0, stream>>>(
        tokens, experts, k, static_cast<const S*>(logits), logit_bias, select_bias, chosen, gates,
        prob_sum);
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void gather_rows(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                 const std::int64_t* src, const void* in, void* out) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(dtype, "moe::cuda::gather_rows", [&](auto tag) {
    using S = decltype(tag);
    gather_rows_kernel<S><<<blocks_for(rows * cols), kThreads, 0, stream>>>(
        rows, cols, src, static_cast<const S*>(in), static_cast<S*>(out));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void combine(cudaStream_t stream, DType dtype, std::int64_t tokens, int k, std::int64_t cols,
             const std::int64_t* slot_pos, const float* gates, const void* back, void* out) {
  if (tokens <= 0 || cols <= 0) return;
  dispatch_storage(dtype, "moe::cuda::combine", [&](auto tag) {
    using S = decltype(tag);
    combine_kernel<S><<<blocks_for(tokens * cols), kThreads, 0, stream>>>(
        tokens, k, cols, slot_pos, gates, static_cast<const S*>(back), static_cast<S*>(out));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace suite::kernels::moe::cuda

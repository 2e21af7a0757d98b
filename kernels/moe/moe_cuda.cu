// Deliberately plain kernels (grid-stride loops, one thread per token for the router): the
// MoE layer's time is in its GEMMs and all-to-alls; these must be correct first.
#include "kernels/moe/moe_cuda.hpp"

#include <stdexcept>
#include <string>

#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"
#include "kernels/moe/moe_grad.hpp"
#include "kernels/moe/moe_index.hpp"
#include "kernels/tokenwise/silu.hpp"

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
                              std::int32_t* chosen, float* gates, float* prob_sum,
                              GroupLimit limit) {
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
    int best_group[kMaxTopK];
    auto score = [&](int e) {
      return expf(load_f32(logits, row + e) + logit_bias[e] - zmax) / sum +
             (select_bias ? select_bias[e] : 0.0f);
    };
    if (limit.active()) top_groups<float>(experts, limit, score, best_group);
    int n = 0;
    for (int e = 0; e < experts; ++e) {
      const float p = expf(load_f32(logits, row + e) + logit_bias[e] - zmax) / sum;
      atomicAdd(&prob_sum[e], p);
      if (!limit.active() || in_groups(e, experts, limit, best_group))
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
      if (pos >= 0)
        acc += (gates ? gates[copy_index(t, s, k)] : 1.0f) * load_f32(back, pos * cols + c);
    }
    store_f32(out, i, acc);
  }
}

// One thread per copy: the gate's gradient, a dot product over the row.
template <class S>
__global__ void gate_grad_kernel(std::int64_t copies, int k, std::int64_t cols,
                                 const std::int64_t* slot_pos, const S* grad_out, const S* back,
                                 float* gate_grad) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       c < copies; c += stride) {
    const std::int64_t pos = slot_pos[c], t = copy_token(c, k);
    float dot = 0;
    if (pos >= 0)
      for (std::int64_t j = 0; j < cols; ++j)
        dot += load_f32(grad_out, t * cols + j) * load_f32(back, pos * cols + j);
    gate_grad[c] = dot;
  }
}

// Element (copy, column): the kept copy's row of gate-weighted output gradient.
template <class S>
__global__ void scatter_grad_kernel(std::int64_t copies, int k, std::int64_t cols,
                                    const std::int64_t* slot_pos, const float* gates,
                                    const S* grad_out, S* grad_back) {
  const std::int64_t n = copies * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t c = i / cols, j = i - c * cols, pos = slot_pos[c];
    if (pos >= 0)
      store_f32(grad_back, pos * cols + j,
                gates[c] * load_f32(grad_out, copy_token(c, k) * cols + j));
  }
}

template <class S>
__global__ void router_backward_kernel(std::int64_t tokens, int experts, int k, const S* logits,
                                       const float* logit_bias, const std::int32_t* chosen,
                                       const float* gate_grad, const float* prob_grad, S* dlogits) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
       t < tokens; t += stride) {
    const std::int64_t row = t * experts;
    float zmax = -INFINITY, sum = 0;
    for (int e = 0; e < experts; ++e)
      zmax = fmaxf(zmax, load_f32(logits, row + e) + logit_bias[e]);
    for (int e = 0; e < experts; ++e)
      sum += expf(load_f32(logits, row + e) + logit_bias[e] - zmax);
    auto prob = [&](int e) { return expf(load_f32(logits, row + e) + logit_bias[e] - zmax) / sum; };
    float chosen_sum = 0, weighted = 0;
    for (int s = 0; s < k; ++s)
      chosen_sum += prob(chosen[copy_index(t, s, k)]);
    for (int s = 0; s < k; ++s) {
      const std::int64_t c = copy_index(t, s, k);
      weighted += gate_grad[c] * prob(chosen[c]) / chosen_sum;
    }
    // dp_e = prob_grad[e] + the gate term of the slot that chose e (each expert at most once).
    auto dprob = [&](int e) {
      float dp = prob_grad[e];
      for (int s = 0; s < k; ++s) {
        const std::int64_t c = copy_index(t, s, k);
        if (chosen[c] == e) dp += gate_to_prob_grad(gate_grad[c], weighted, chosen_sum);
      }
      return dp;
    };
    float p_dot_dp = 0;
    for (int e = 0; e < experts; ++e)
      p_dot_dp += prob(e) * dprob(e);
    for (int e = 0; e < experts; ++e)
      store_f32(dlogits, row + e, softmax_grad(prob(e), dprob(e), p_dot_dp));
  }
}

template <class S>
__global__ void swiglu_backward_kernel(std::int64_t rows, std::int64_t cols, const S* x,
                                       const S* dy, S* dx) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols, c = i - r * cols;
    const std::int64_t gi = swiglu_gate_index(r, c, cols), ui = swiglu_up_index(r, c, cols);
    const float a = load_f32(x, gi), b = load_f32(x, ui), g = load_f32(dy, i);
    store_f32(dx, gi, g * b * silu_grad(a));
    store_f32(dx, ui, g * silu(a));
  }
}

}  // namespace

void router_topk(cudaStream_t stream, DType dtype, std::int64_t tokens, int experts, int k,
                 const void* logits, const float* logit_bias, const float* select_bias,
                 std::int32_t* chosen, float* gates, float* prob_sum, GroupLimit limit) {
  if (k < 1 || k > experts || k > kMaxTopK)
    throw std::invalid_argument("cuda::router_topk: k must be in [1, min(experts, " +
                                std::to_string(kMaxTopK) + ")]");
  if (limit.active() && !group_limit_valid(experts, k, limit))
    throw std::invalid_argument("cuda::router_topk: invalid group limit");
  if (tokens <= 0) return;
  dispatch_storage(dtype, "moe::cuda::router_topk", [&](auto tag) {
    using S = decltype(tag);
    router_kernel<S><<<blocks_for(tokens), kThreads, 0, stream>>>(
        tokens, experts, k, static_cast<const S*>(logits), logit_bias, select_bias, chosen, gates,
        prob_sum, limit);
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

void combine_backward(cudaStream_t stream, DType dtype, std::int64_t tokens, int k,
                      std::int64_t cols, const std::int64_t* slot_pos, const float* gates,
                      const void* grad_out, const void* back, void* grad_back, float* gate_grad) {
  if (tokens <= 0) return;
  const std::int64_t copies = tokens * k;
  dispatch_storage(dtype, "moe::cuda::combine_backward", [&](auto tag) {
    using S = decltype(tag);
    gate_grad_kernel<S><<<blocks_for(copies), kThreads, 0, stream>>>(
        copies, k, cols, slot_pos, static_cast<const S*>(grad_out), static_cast<const S*>(back),
        gate_grad);
    SUITE_CUDA_CHECK_LAUNCH();
    if (cols <= 0) return;
    scatter_grad_kernel<S><<<blocks_for(copies * cols), kThreads, 0, stream>>>(
        copies, k, cols, slot_pos, gates, static_cast<const S*>(grad_out),
        static_cast<S*>(grad_back));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void router_backward(cudaStream_t stream, DType dtype, std::int64_t tokens, int experts, int k,
                     const void* logits, const float* logit_bias, const std::int32_t* chosen,
                     const float* gate_grad, const float* prob_grad, void* dlogits) {
  if (k < 1 || k > experts || k > kMaxTopK)
    throw std::invalid_argument("cuda::router_backward: k must be in [1, min(experts, " +
                                std::to_string(kMaxTopK) + ")]");
  if (tokens <= 0) return;
  dispatch_storage(dtype, "moe::cuda::router_backward", [&](auto tag) {
    using S = decltype(tag);
    router_backward_kernel<S><<<blocks_for(tokens), kThreads, 0, stream>>>(
        tokens, experts, k, static_cast<const S*>(logits), logit_bias, chosen, gate_grad, prob_grad,
        static_cast<S*>(dlogits));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void swiglu_backward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                     const void* x, const void* dy, void* dx) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(dtype, "moe::cuda::swiglu_backward", [&](auto tag) {
    using S = decltype(tag);
    swiglu_backward_kernel<S><<<blocks_for(rows * cols), kThreads, 0, stream>>>(
        rows, cols, static_cast<const S*>(x), static_cast<const S*>(dy), static_cast<S*>(dx));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace suite::kernels::moe::cuda

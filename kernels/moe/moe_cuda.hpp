// MoE kernels on the GPU: device pointers, bf16 or fp32 storage for token rows and logits,
// fp32 arithmetic; routing arrays (chosen int32, gates fp32, slot positions int64) as in
// moe_cpu.hpp, whose CPU versions are the reference.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/dtype.hpp"
#include "kernels/moe/moe_index.hpp"

namespace suite::kernels::moe::cuda {

// Softmax of logits + logit_bias per token, top-k of p + select_bias, gates renormalised
// (one thread per token; fp32). prob_sum[e] += p_e over tokens (atomics: the caller zeroes it).
// select_bias may be null. limit: node-limited routing (moe_index.hpp), as the CPU's.
void router_topk(cudaStream_t stream, DType dtype, std::int64_t tokens, int experts, int k,
                 const void* logits, const float* logit_bias, const float* select_bias,
                 std::int32_t* chosen, float* gates, float* prob_sum, GroupLimit limit = {});

// out[i, :] = in[src[i], :].
void gather_rows(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                 const std::int64_t* src, const void* in, void* out);

// Gate-weighted sum of each token's kept copies (slot order, fp32 accumulation); gates ==
// nullptr: plain sum (the dispatch's backward).
void combine(cudaStream_t stream, DType dtype, std::int64_t tokens, int k, std::int64_t cols,
             const std::int64_t* slot_pos, const float* gates, const void* back, void* out);

// Backward of combine (moe_cpu.hpp): gate_grad per copy (one thread per copy, fp32 dot
// product; 0 when dropped) and the gate-weighted output gradient rows of the kept copies.
void combine_backward(cudaStream_t stream, DType dtype, std::int64_t tokens, int k,
                      std::int64_t cols, const std::int64_t* slot_pos, const float* gates,
                      const void* grad_out, const void* back, void* grad_back, float* gate_grad);

// Backward of router_topk with the choice held fixed (one thread per token, fp32).
void router_backward(cudaStream_t stream, DType dtype, std::int64_t tokens, int experts, int k,
                     const void* logits, const float* logit_bias, const std::int32_t* chosen,
                     const float* gate_grad, const float* prob_grad, void* dlogits);

// Backward of SwiGLU's silu * mul (x [rows, 2 cols], dy [rows, cols], dx [rows, 2 cols]), fp32
// arithmetic. GeLU's backward is the token-wise kernels' (kernels/tokenwise).
void swiglu_backward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                     const void* x, const void* dy, void* dx);

}  // namespace suite::kernels::moe::cuda
#endif

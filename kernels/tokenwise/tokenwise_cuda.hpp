// Token-wise ops on the GPU: device pointers, bf16 or fp32 storage (all operands share it),
// fp32 arithmetic. Same semantics and dropout bits as the CPU versions in tokenwise_cpu.hpp.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/core/dtype.hpp"

namespace suite::kernels::cuda {

// One block per row; fp32 two-pass mean/variance. x and y may alias.
void layernorm_forward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                       const void* x, const void* gamma, const void* beta, float eps, void* y);

// GeLU, tanh approximation (same formula as the CPU's gelu_tanh).
void gelu_forward(cudaStream_t stream, DType dtype, std::int64_t n, const void* x, void* y);

// SwiGLU's silu(x[:, :cols]) * x[:, cols:] for x [rows, 2 cols] into y [rows, cols].
void silu_mul_forward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                      const void* x, void* y);

void residual_add(cudaStream_t stream, DType dtype, std::int64_t n, const void* x,
                  const void* residual, void* y);

// Masks keyed by (seed, row_offset + r, c): bit-identical to cpu::dropout_forward.
void dropout_forward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                     float p, std::uint64_t seed, std::int64_t row_offset, const void* x, void* y,
                     std::uint8_t* mask);

// ---- Backward (tokenwise_backward.cu): the CPU versions' semantics, fp32 arithmetic.

// Bytes of the float scratch layernorm_backward needs: [rows, 2] row statistics.
inline std::size_t layernorm_backward_workspace_bytes(std::int64_t rows) {
  return static_cast<std::size_t>(rows > 0 ? rows : 0) * 2 * sizeof(float);
}
// dx (one block per row) and dgamma / dbeta summed over these rows (one thread per column,
// rows in order: deterministic). `workspace` holds layernorm_backward_workspace_bytes(rows).
void layernorm_backward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                        const void* x, const void* gamma, const void* dy, float eps, void* dx,
                        void* dgamma, void* dbeta, float* workspace);

void gelu_backward(cudaStream_t stream, DType dtype, std::int64_t n, const void* x, const void* dy,
                   void* dx);

void dropout_backward(cudaStream_t stream, DType dtype, std::int64_t n, float p,
                      const std::uint8_t* mask, const void* dy, void* dx);

// In place, one block per row (see cpu::softmax_dropout_backward).
void softmax_dropout_backward(cudaStream_t stream, DType dtype, std::int64_t rows,
                              std::int64_t cols, float p, const void* probs,
                              const std::uint8_t* mask, void* g);

}  // namespace suite::kernels::cuda
#endif

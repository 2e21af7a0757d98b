// Token-wise ops on the GPU: device pointers, bf16 or fp32 storage (all operands share it),
// fp32 arithmetic. Same semantics and dropout bits as the CPU versions in tokenwise_cpu.hpp.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

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

}  // namespace suite::kernels::cuda
#endif

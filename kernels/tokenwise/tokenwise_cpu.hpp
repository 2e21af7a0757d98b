// Token-wise ops on the CPU over row-major [rows = s*b tokens, cols = h] activations
// (row index = s_idx * b + b_idx, Megatron's [s, b, h] flattened).
#pragma once

#include <cstdint>
#include <type_traits>

namespace suite::kernels::cpu {

// y = (x - mean) / sqrt(var + eps) * gamma + beta per row; biased variance, two-pass, double
// accumulation. x and y may alias.
template <class T>
void layernorm_forward(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma,
                       const T* beta, std::type_identity_t<T> eps, T* y);

// GeLU, tanh approximation (Megatron's bias_gelu / PyTorch approximate="tanh"):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). x and y may alias.
template <class T>
void gelu_forward(std::int64_t n, const T* x, T* y);

// SwiGLU's activation: y[r, c] = silu(x[r, c]) * x[r, cols + c] for x [rows, 2 cols] (gate
// half then up half, one GEMM against [h, 2 d_ff]) and y [rows, cols]. x and y must not alias.
template <class T>
void silu_mul_forward(std::int64_t rows, std::int64_t cols, const T* x, T* y);

// y = x + residual elementwise; any of the three may alias.
template <class T>
void residual_add(std::int64_t n, const T* x, const T* residual, T* y);

// Dropout with drop probability p in [0, 1): mask[r, c] = 1 keeps x * 1/(1-p), 0 drops.
// Bits are keyed by (seed, row_offset + r, c): row_offset is the global index of the first
// row, so a shard of rows draws exactly the unsharded run's masks. p = 0 keeps everything.
template <class T>
void dropout_forward(std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                     std::int64_t row_offset, const T* x, T* y, std::uint8_t* mask);

// ---- Backward (tokenwise_backward_cpu.cpp). Gradients of sum(dy * y) for the forward above.

// LayerNorm: dx [rows, cols] and the weight and bias gradients summed over these rows,
// dgamma[c] = sum_r dy[r, c] xhat[r, c], dbeta[c] = sum_r dy[r, c] (overwritten). Mean and
// rstd are recomputed from x as the forward computes them; double accumulation. dx may alias dy.
template <class T>
void layernorm_backward(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma,
                        const T* dy, std::type_identity_t<T> eps, T* dx, T* dgamma, T* dbeta);

// GeLU (tanh approximation): dx = dy * gelu'(x). dx may alias dy.
template <class T>
void gelu_backward(std::int64_t n, const T* x, const T* dy, T* dx);

// Dropout from the forward's mask: dx = mask ? dy / (1 - p) : 0. dx may alias dy.
template <class T>
void dropout_backward(std::int64_t n, float p, const std::uint8_t* mask, const T* dy, T* dx);

// Backward of softmax then dropout, row by row, in place: on entry g [rows, cols] is the
// gradient of the dropout's output, probs the softmax and mask its dropout mask; on exit g is
// the gradient of the softmax's input: probs * (d - sum_k probs_k d_k) with d = g * mask/(1-p).
template <class T>
void softmax_dropout_backward(std::int64_t rows, std::int64_t cols, float p, const T* probs,
                              const std::uint8_t* mask, T* g);

}  // namespace suite::kernels::cpu

// SwiGLU's gate: silu(a) * b with silu(a) = a / (1 + exp(-a)), and silu's derivative, shared
// by CPU and CUDA code.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

template <class T>
SUITE_HD inline T silu(T a) {
#if defined(__CUDA_ARCH__)
  return a / (static_cast<T>(1) + exp(-a));
#else
  return a / (static_cast<T>(1) + std::exp(-a));
#endif
}

template <class S>
SUITE_HD inline S sigmoid(S a) {
#if defined(__CUDA_ARCH__)
  return static_cast<S>(1) / (static_cast<S>(1) + exp(-a));
#else
  return static_cast<S>(1) / (static_cast<S>(1) + std::exp(-a));
#endif
}

// d/da silu(a) = s (1 + a (1 - s)) with s = sigmoid(a).
template <class S>
SUITE_HD inline S silu_grad(S a) {
  const S s = sigmoid(a);
  return s * (static_cast<S>(1) + a * (static_cast<S>(1) - s));
}

// Row r of a [rows, 2 * cols] input holds the gate half (columns [0, cols)) then the up half
// (columns [cols, 2 cols)); output element (r, c) of the [rows, cols] result reads these two.
SUITE_HD inline std::int64_t swiglu_gate_index(std::int64_t r, std::int64_t c, std::int64_t cols) {
  return r * 2 * cols + c;
}
SUITE_HD inline std::int64_t swiglu_up_index(std::int64_t r, std::int64_t c, std::int64_t cols) {
  return r * 2 * cols + cols + c;
}

}  // namespace suite::kernels

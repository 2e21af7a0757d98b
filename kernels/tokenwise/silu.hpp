// SwiGLU's gate: silu(a) * b with silu(a) = a / (1 + exp(-a)), shared by CPU and CUDA code.
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

// Row r of a [rows, 2 * cols] input holds the gate half (columns [0, cols)) then the up half
// (columns [cols, 2 cols)); output element (r, c) of the [rows, cols] result reads these two.
SUITE_HD inline std::int64_t swiglu_gate_index(std::int64_t r, std::int64_t c, std::int64_t cols) {
  return r * 2 * cols + c;
}
SUITE_HD inline std::int64_t swiglu_up_index(std::int64_t r, std::int64_t c, std::int64_t cols) {
  return r * 2 * cols + cols + c;
}

}  // namespace suite::kernels

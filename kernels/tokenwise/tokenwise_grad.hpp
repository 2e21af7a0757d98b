// The element-wise arithmetic of the token-wise backward ops, shared by the CPU and CUDA
// kernels (SUITE_HD; S = double or float on the CPU, float on the GPU), so the CPU tests
// exercise the very formulas and index arithmetic the GPU runs.
#pragma once

#include <cstdint>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

// Softmax backward for one element: dz_j = p_j (dp_j - sum_k p_k dp_k).
template <class S>
SUITE_HD inline S softmax_grad(S p, S dp, S p_dot_dp) {
  return p * (dp - p_dot_dp);
}

// Dropout backward from the stored mask: the kept elements pass dy * 1/(1-p), the dropped 0.
template <class S>
SUITE_HD inline S dropout_grad(S dy, std::uint8_t keep, S keep_scale) {
  return keep ? dy * keep_scale : static_cast<S>(0);
}

// LayerNorm y = xhat * gamma + beta, xhat = (x - mean) * rstd. With g = dy * gamma and the row
// means mean_g = mean(g), mean_gx = mean(g * xhat):
// dx = rstd * (g - mean_g - xhat * mean_gx).
template <class S>
SUITE_HD inline S layernorm_input_grad(S g, S xhat, S mean_g, S mean_gx, S rstd) {
  return rstd * (g - mean_g - xhat * mean_gx);
}

// Row statistics the CUDA LayerNorm backward keeps between its two kernels: [rows, 2] floats,
// the mean then the reciprocal standard deviation of each row.
SUITE_HD inline std::int64_t layernorm_mean_index(std::int64_t row) {
  return 2 * row;
}
SUITE_HD inline std::int64_t layernorm_rstd_index(std::int64_t row) {
  return 2 * row + 1;
}

// Element (r, c) of a row-major [rows, cols] tensor: the column kernel walks c fixed, r up.
SUITE_HD inline std::int64_t row_major_index(std::int64_t r, std::int64_t c, std::int64_t cols) {
  return r * cols + c;
}

}  // namespace suite::kernels

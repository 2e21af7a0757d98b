// LayerNorm's row statistics on the CPU, shared by the forward and the backward (which
// recomputes them rather than saving them): mean and 1/sqrt(variance + eps) in double, the
// variance from a second pass over x - mean (no cancellation for rows with a large mean).
#pragma once

#include <cmath>
#include <cstdint>

namespace suite::kernels::cpu {

struct RowStats {
  double mean, rstd;
};

template <class T>
RowStats layernorm_row_stats(const T* x, std::int64_t cols, double eps) {
  double sum = 0;
  for (std::int64_t c = 0; c < cols; ++c)
    sum += x[c];
  const double mean = sum / static_cast<double>(cols);
  double sq = 0;
  for (std::int64_t c = 0; c < cols; ++c)
    sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(cols) + eps)};
}

}  // namespace suite::kernels::cpu

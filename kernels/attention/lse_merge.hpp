// Exact merge of two softmax partials over disjoint key sets (METHODS.md section 2):
//   lse = log(exp(lse_a) + exp(lse_b)),  o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b.
// Computed around the larger lse so nothing overflows; an empty partial (lse = -inf) gets
// weight exactly 0 and two empty partials stay empty (-inf, weights 0) without NaN.
#pragma once

#include <cmath>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

template <class T>
struct MergeWeights {
  T lse;
  T w_a;
  T w_b;
};

// Weights are exactly (1, 0) when b is empty, so an empty partial leaves o_a bit-identical.
template <class T>
SUITE_HD inline MergeWeights<T> merge_weights(T lse_a, T lse_b) {
  const T hi = lse_a > lse_b ? lse_a : lse_b;
  if (hi == -INFINITY) return {static_cast<T>(-INFINITY), T(0), T(0)};
    // exp(-inf - hi) = 0, and the larger side contributes exp(0) = 1: symmetric in (a, b).
#if defined(__CUDA_ARCH__)
  const T ea = exp(lse_a - hi);  // CUDA's overloads: expf/logf for float
  const T eb = exp(lse_b - hi);
  const T sum = ea + eb;
  return {hi + log(sum), ea / sum, eb / sum};
#else
  const T ea = std::exp(lse_a - hi);
  const T eb = std::exp(lse_b - hi);
  const T sum = ea + eb;
  return {hi + std::log(sum), ea / sum, eb / sum};
#endif
}

// w * x, with a zero weight giving 0 even when x is garbage or NaN (an empty partial's o).
template <class T>
SUITE_HD inline T weighted(T w, T x) {
  return w != T(0) ? w * x : T(0);
}

}  // namespace suite::kernels

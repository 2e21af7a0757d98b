// The one GeLU formula of the suite (tanh approximation), shared by CPU and CUDA code.
#pragma once

#include <cmath>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

template <class T>
SUITE_HD inline T gelu_tanh(T x) {
  const T k0 = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
  const T k1 = static_cast<T>(0.044715);
#if defined(__CUDA_ARCH__)
  const T t = tanh(k0 * (x + k1 * x * x * x));  // CUDA's overloads: tanhf for float
#else
  const T t = std::tanh(k0 * (x + k1 * x * x * x));
#endif
  return static_cast<T>(0.5) * x * (static_cast<T>(1) + t);
}

}  // namespace suite::kernels

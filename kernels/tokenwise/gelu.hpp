// The one GeLU formula of the suite (tanh approximation) and its derivative, shared by CPU and
// CUDA code (the layer's and the MoE experts' backward).
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

// d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3):
// 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <class S>
SUITE_HD inline S gelu_tanh_grad(S x) {
  const S k0 = static_cast<S>(0.7978845608028654);  // sqrt(2 / pi)
  const S k1 = static_cast<S>(0.044715);
#if defined(__CUDA_ARCH__)
  const S t = tanh(k0 * (x + k1 * x * x * x));
#else
  const S t = std::tanh(k0 * (x + k1 * x * x * x));
#endif
  const S half = static_cast<S>(0.5);
  return half * (static_cast<S>(1) + t) +
         half * x * (static_cast<S>(1) - t * t) * k0 * (static_cast<S>(1) + 3 * k1 * x * x);
}

}  // namespace suite::kernels

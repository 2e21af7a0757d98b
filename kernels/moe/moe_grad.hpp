// The derivatives the MoE backward kernels share between the CPU and CUDA versions (SUITE_HD,
// S = double on the CPU, float on the GPU): the expert activations (GeLU's tanh approximation,
// SwiGLU's silu), the renormalised gates and the softmax. The bench's host reference
// (bench/moe/moe_reference_grad.cpp) writes its own and does not include this file.
#pragma once

#include <cmath>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels::moe {

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

// Gates g_s = p_s / S over the k chosen experts (S = their probability sum). The gradient
// reaching p_s is (dg_s - G) / S, with G = sum over slots of dg * g.
template <class S>
SUITE_HD inline S gate_to_prob_grad(S dgate, S weighted_sum, S chosen_sum) {
  return (dgate - weighted_sum) / chosen_sum;
}

// Softmax backward for one logit: dz_e = p_e (dp_e - sum_j p_j dp_j).
template <class S>
SUITE_HD inline S softmax_grad(S p, S dp, S p_dot_dp) {
  return p * (dp - p_dot_dp);
}

}  // namespace suite::kernels::moe

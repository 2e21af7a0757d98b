// The derivatives the MoE backward kernels share between the CPU and CUDA versions (SUITE_HD,
// S = double on the CPU, float on the GPU): SwiGLU's silu and the softmax, from
// kernels/tokenwise, and the renormalised gates (GeLU's backward is the token-wise kernel's). The
// bench's host reference (bench/moe/moe_reference_grad.cpp) writes its own and does not
// include this file.
#pragma once

#include <cmath>

#include "kernels/core/bf16.hpp"  // SUITE_HD
#include "kernels/tokenwise/silu.hpp"
#include "kernels/tokenwise/tokenwise_grad.hpp"

namespace suite::kernels::moe {

// One copy of each, in kernels/tokenwise, shared with the transformer layer's backward.
using kernels::sigmoid;
using kernels::silu_grad;
using kernels::softmax_grad;

// Gates g_s = p_s / S over the k chosen experts (S = their probability sum). The gradient
// reaching p_s is (dg_s - G) / S, with G = sum over slots of dg * g.
template <class S>
SUITE_HD inline S gate_to_prob_grad(S dgate, S weighted_sum, S chosen_sum) {
  return (dgate - weighted_sum) / chosen_sum;
}

}  // namespace suite::kernels::moe

// The compute an MoE layer needs, on whichever backend the run uses. Pointers are the
// Device's buffers; rows are the run's dtype; routing arrays are int32 (experts), fp32
// (gates, biases, probability sums) and int64 (row indices). CPU: the kernels' references;
// CUDA: the CUDA kernels and cuBLAS.
#pragma once

#include <cstdint>
#include <memory>

#include "common/device/device.hpp"
#include "common/sim/sim.hpp"
#include "kernels/core/dtype.hpp"
#include "kernels/moe/moe_index.hpp"

namespace suite::moe {

class MoeOps {
 public:
  virtual ~MoeOps() = default;
  // C[m, n] = op(A) op(B) + beta C, dense row-major: op(A) is [m, k] (stored [k, m] when
  // trans_a), op(B) is [k, n] (stored [n, k] when trans_b). beta is 0 or 1.
  virtual void gemm_ex(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                       const void* a, const void* b, double beta, void* c) = 0;
  // C[m, n] = A[m, k] B[k, n].
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const void* a, const void* b, void* c) {
    gemm_ex(false, false, m, n, k, a, b, 0.0, c);
  }
  // The router's logits [tokens, experts] = x [tokens, h] W [h, experts]: the GEMM whose result
  // decides the routing. Modeled compute (common/sim/sim.hpp) injects its FLOPs only: x holds no
  // values there, and MoeLayer::route draws the logits instead.
  virtual void router_logits(std::int64_t tokens, std::int64_t experts, std::int64_t h,
                             const void* x, const void* w, void* logits) {
    gemm(tokens, experts, h, x, w, logits);
  }
  // Softmax + top-k + renormalised gates (kernels/moe); prob_sum[e] += p_e over tokens;
  // limit: node-limited routing (kernels/moe/moe_index.hpp).
  virtual void router(std::int64_t tokens, int experts, int k, const void* logits,
                      const float* logit_bias, const float* select_bias, std::int32_t* chosen,
                      float* gates, float* prob_sum, kernels::moe::GroupLimit limit) = 0;
  virtual void gather_rows(std::int64_t rows, std::int64_t cols, const std::int64_t* src,
                           const void* in, void* out) = 0;
  // gates == nullptr: each token's kept copies summed (the dispatch's backward).
  virtual void combine(std::int64_t tokens, int k, std::int64_t cols, const std::int64_t* slot_pos,
                       const float* gates, const void* back, void* out) = 0;
  virtual void gelu(std::int64_t n, const void* x, void* y) = 0;
  virtual void silu_mul(std::int64_t rows, std::int64_t cols, const void* x, void* y) = 0;

  // Backward ops (kernels/moe/moe_cpu.hpp describes each).
  virtual void combine_backward(std::int64_t tokens, int k, std::int64_t cols,
                                const std::int64_t* slot_pos, const float* gates,
                                const void* grad_out, const void* back, void* grad_back,
                                float* gate_grad) = 0;
  virtual void router_backward(std::int64_t tokens, int experts, int k, const void* logits,
                               const float* logit_bias, const std::int32_t* chosen,
                               const float* gate_grad, const float* prob_grad, void* dlogits) = 0;
  virtual void gelu_backward(std::int64_t n, const void* x, const void* dy, void* dx) = 0;
  virtual void silu_mul_backward(std::int64_t rows, std::int64_t cols, const void* x,
                                 const void* dy, void* dx) = 0;
  // bytes of zeros at p (a weight gradient of an expert that received no rows).
  virtual void zero(void* p, std::size_t bytes) = 0;
};

std::unique_ptr<MoeOps> make_cpu_moe_ops(DType dtype);
// Modeled compute (SMPI build, --sim-flops): GEMMs skipped and their FLOPs injected, the
// router's included (moe_ops_modeled.cpp); any dtype (sizes only).
std::unique_ptr<MoeOps> make_modeled_moe_ops(DType dtype);
// Throws UsageError when the build has no CUDA.
std::unique_ptr<MoeOps> make_cuda_moe_ops(Device& device, DType dtype);

inline std::unique_ptr<MoeOps> make_moe_ops(Device& device, DType dtype) {
  if (device.backend() == Backend::cuda) return make_cuda_moe_ops(device, dtype);
  return sim::modeled() ? make_modeled_moe_ops(dtype) : make_cpu_moe_ops(dtype);
}

}  // namespace suite::moe

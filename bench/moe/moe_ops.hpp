// The compute an MoE layer needs, on whichever backend the run uses. Pointers are the
// Device's buffers; rows are the run's dtype; routing arrays are int32 (experts), fp32
// (gates, biases, probability sums) and int64 (row indices). CPU: the kernels' references;
// CUDA: the CUDA kernels and cuBLAS.
#pragma once

#include <cstdint>
#include <memory>

#include "common/device.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::moe {

class MoeOps {
 public:
  virtual ~MoeOps() = default;
  // C[m, n] = A[m, k] B[k, n], dense row-major.
  virtual void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const void* a, const void* b,
                    void* c) = 0;
  // Softmax + top-k + renormalised gates (kernels/moe); prob_sum[e] += p_e over tokens.
  virtual void router(std::int64_t tokens, int experts, int k, const void* logits,
                      const float* logit_bias, const float* select_bias, std::int32_t* chosen,
                      float* gates, float* prob_sum) = 0;
  virtual void gather_rows(std::int64_t rows, std::int64_t cols, const std::int64_t* src,
                           const void* in, void* out) = 0;
  virtual void combine(std::int64_t tokens, int k, std::int64_t cols, const std::int64_t* slot_pos,
                       const float* gates, const void* back, void* out) = 0;
  virtual void gelu(std::int64_t n, const void* x, void* y) = 0;
  virtual void silu_mul(std::int64_t rows, std::int64_t cols, const void* x, void* y) = 0;
};

std::unique_ptr<MoeOps> make_cpu_moe_ops(DType dtype);
// Throws UsageError when the build has no CUDA.
std::unique_ptr<MoeOps> make_cuda_moe_ops(Device& device, DType dtype);

inline std::unique_ptr<MoeOps> make_moe_ops(Device& device, DType dtype) {
  return device.backend() == Backend::cuda ? make_cuda_moe_ops(device, dtype)
                                           : make_cpu_moe_ops(dtype);
}

}  // namespace suite::moe

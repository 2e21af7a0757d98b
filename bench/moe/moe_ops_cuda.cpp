// CUDA backend of MoeOps: the kernels' CUDA versions on the device's stream, GEMMs (the
// forward's and the backward's transposed ones) through cuBLASLt, plain cuBLAS where its
// heuristic declines (bf16 or fp32 storage, fp32 accumulation). Compiled only when the build has
// CUDA.
#include <cuda_runtime.h>

#include "bench/moe/moe_ops.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/gemm/gemm_lt.hpp"
#include "kernels/moe/moe_cuda.hpp"
#include "kernels/tokenwise/tokenwise_cuda.hpp"

namespace suite::moe {
namespace {

namespace k = kernels::cuda;
namespace km = kernels::moe::cuda;

class CudaMoeOps final : public MoeOps {
 public:
  CudaMoeOps(Device& device, DType dtype)
      : stream_(static_cast<cudaStream_t>(device.stream())), dtype_(dtype) {}
  void gemm_ex(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t kk, const void* a,
               const void* b, double beta, void* c) override {
    lt_.gemm(stream_, dtype_, ta, tb, m, n, kk, 1.0f, a, ta ? m : kk, b, tb ? kk : n,
             static_cast<float>(beta), c, n);
  }
  void router(std::int64_t tokens, int experts, int kk, const void* logits, const float* logit_bias,
              const float* select_bias, std::int32_t* chosen, float* gates, float* prob_sum,
              kernels::moe::GroupLimit limit) override {
    km::router_topk(stream_, dtype_, tokens, experts, kk, logits, logit_bias, select_bias, chosen,
                    gates, prob_sum, limit);
  }
  void gather_rows(std::int64_t rows, std::int64_t cols, const std::int64_t* src, const void* x,
                   void* y) override {
    km::gather_rows(stream_, dtype_, rows, cols, src, x, y);
  }
  void combine(std::int64_t tokens, int kk, std::int64_t cols, const std::int64_t* slot_pos,
               const float* gates, const void* back, void* y) override {
    km::combine(stream_, dtype_, tokens, kk, cols, slot_pos, gates, back, y);
  }
  void gelu(std::int64_t n, const void* x, void* y) override {
    k::gelu_forward(stream_, dtype_, n, x, y);
  }
  void silu_mul(std::int64_t rows, std::int64_t cols, const void* x, void* y) override {
    k::silu_mul_forward(stream_, dtype_, rows, cols, x, y);
  }
  void combine_backward(std::int64_t tokens, int kk, std::int64_t cols,
                        const std::int64_t* slot_pos, const float* gates, const void* grad_out,
                        const void* back, void* grad_back, float* gate_grad) override {
    km::combine_backward(stream_, dtype_, tokens, kk, cols, slot_pos, gates, grad_out, back,
                         grad_back, gate_grad);
  }
  void router_backward(std::int64_t tokens, int experts, int kk, const void* logits,
                       const float* logit_bias, const std::int32_t* chosen, const float* gate_grad,
                       const float* prob_grad, void* dlogits) override {
    km::router_backward(stream_, dtype_, tokens, experts, kk, logits, logit_bias, chosen, gate_grad,
                        prob_grad, dlogits);
  }
  void gelu_backward(std::int64_t n, const void* x, const void* dy, void* dx) override {
    k::gelu_backward(stream_, dtype_, n, x, dy, dx);
  }
  void silu_mul_backward(std::int64_t rows, std::int64_t cols, const void* x, const void* dy,
                         void* dx) override {
    km::swiglu_backward(stream_, dtype_, rows, cols, x, dy, dx);
  }
  void zero(void* p, std::size_t bytes) override {
    SUITE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  }

 private:
  cudaStream_t stream_;
  DType dtype_;
  k::GemmLt lt_;  // cuBLASLt plans cached per shape
};

}  // namespace

std::unique_ptr<MoeOps> make_cuda_moe_ops(Device& device, DType dtype) {
  return std::make_unique<CudaMoeOps>(device, dtype);
}

}  // namespace suite::moe

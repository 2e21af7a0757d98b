// CUDA backend of LayerOps: the kernels' CUDA versions on the device's stream, GEMMs in
// cuBLASLt (bf16 or fp32 storage, fp32 accumulation), attention through an AttentionEngine.
// Compiled only when the build has CUDA.
#include <cuda_runtime.h>

#include "bench/sp_tp/layer_ops.hpp"
#include "kernels/attention/attention_cuda.hpp"
#include "kernels/core/cublas_handle.hpp"
#include "kernels/gemm/gemm_cuda.hpp"
#include "kernels/gemm/gemm_lt.hpp"
#include "kernels/tokenwise/tokenwise_cuda.hpp"

namespace suite::sp_tp {
namespace {

namespace k = kernels::cuda;

class CudaLayerOps final : public LayerOps {
 public:
  CudaLayerOps(Device& device, DType dtype, kernels::AttnKernelChoice attn)
      : LayerOps(kernels::make_cuda_attention_engine(device.stream(), dtype, attn)),
        stream_(static_cast<cudaStream_t>(device.stream())),
        dtype_(dtype) {
    blas_.set_stream(stream_);
  }
  void gemm_ex(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t kk, double alpha,
               const void* a, std::int64_t lda, const void* b, std::int64_t ldb, double beta,
               void* c, std::int64_t ldc) override {
    lt_.gemm(stream_, dtype_, ta, tb, m, n, kk, static_cast<float>(alpha), a, lda, b, ldb,
             static_cast<float>(beta), c, ldc);
  }
  void layernorm(std::int64_t rows, std::int64_t cols, const void* x, const void* gamma,
                 const void* beta, void* y) override {
    k::layernorm_forward(stream_, dtype_, rows, cols, x, gamma, beta, 1e-5f, y);
  }
  void gelu(std::int64_t n, const void* x, void* y) override {
    k::gelu_forward(stream_, dtype_, n, x, y);
  }
  void residual_add(std::int64_t n, const void* x, const void* r, void* y) override {
    k::residual_add(stream_, dtype_, n, x, r, y);
  }
  void dropout(std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
               std::int64_t row_offset, const void* x, void* y, std::uint8_t* mask) override {
    k::dropout_forward(stream_, dtype_, rows, cols, p, seed, row_offset, x, y, mask);
  }
  std::size_t layernorm_workspace_bytes(std::int64_t rows) const override {
    return k::layernorm_backward_workspace_bytes(rows);
  }
  void layernorm_backward(std::int64_t rows, std::int64_t cols, const void* x, const void* gamma,
                          const void* dy, void* dx, void* dgamma, void* dbeta,
                          void* workspace) override {
    k::layernorm_backward(stream_, dtype_, rows, cols, x, gamma, dy, 1e-5f, dx, dgamma, dbeta,
                          static_cast<float*>(workspace));
  }
  void gelu_backward(std::int64_t n, const void* x, const void* dy, void* dx) override {
    k::gelu_backward(stream_, dtype_, n, x, dy, dx);
  }
  void dropout_backward(std::int64_t n, float p, const std::uint8_t* mask, const void* dy,
                        void* dx) override {
    k::dropout_backward(stream_, dtype_, n, p, mask, dy, dx);
  }
  void softmax_dropout_backward(std::int64_t rows, std::int64_t cols, float p, const void* probs,
                                const std::uint8_t* mask, void* g) override {
    k::softmax_dropout_backward(stream_, dtype_, rows, cols, p, probs, mask, g);
  }
  void attention_unfused(const kernels::AttentionParams& p, float dropout_p, std::uint64_t seed,
                         int head_offset, const void* q, const void* kk, const void* v,
                         const std::int64_t* q_pos, const std::int64_t* k_pos, void* probs,
                         std::uint8_t* mask, void* probs_dropped, void* o, void* lse) override {
    k::attention_unfused(blas_, stream_, dtype_, p, dropout_p, seed, head_offset, q, kk, v, q_pos,
                         k_pos, probs, mask, probs_dropped, o, static_cast<float*>(lse));
  }

 private:
  cudaStream_t stream_;
  DType dtype_;
  k::CublasHandle blas_;  // the unfused attention's batched GEMMs
  k::GemmLt lt_;          // the layer's GEMMs (cuBLASLt, plain cuBLAS where it declines)
};

}  // namespace

std::unique_ptr<LayerOps> make_cuda_layer_ops(Device& device, DType dtype,
                                              kernels::AttnKernelChoice attn) {
  return std::make_unique<CudaLayerOps>(device, dtype, attn);
}

}  // namespace suite::sp_tp

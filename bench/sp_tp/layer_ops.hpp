// The compute a transformer layer needs, on whichever backend the run uses. Pointers are the
// Device's buffers; elements are the run's dtype (lse: lse_elem_size() bytes each). The CPU
// version calls the kernels' CPU references, the CUDA one the CUDA kernels and cuBLAS.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "common/device/device.hpp"
#include "common/sim/sim.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/attention/attention_index.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::sp_tp {

class LayerOps {
 public:
  virtual ~LayerOps() = default;
  std::size_t lse_elem_size() const { return attn_->lse_elem_size(); }
  // C = alpha op(A) op(B) + beta C, row-major, op(A) m x k and op(B) k x n, leading dimensions
  // in elements (the backward's input and weight gradients need the transposes).
  virtual void gemm_ex(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                       double alpha, const void* a, std::int64_t lda, const void* b,
                       std::int64_t ldb, double beta, void* c, std::int64_t ldc) = 0;
  // C[m, n] = A[m, k] B[k, n], dense row-major.
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k, const void* a, const void* b, void* c) {
    gemm_ex(false, false, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  }
  virtual void layernorm(std::int64_t rows, std::int64_t cols, const void* x, const void* gamma,
                         const void* beta, void* y) = 0;
  virtual void gelu(std::int64_t n, const void* x, void* y) = 0;
  virtual void residual_add(std::int64_t n, const void* x, const void* residual, void* y) = 0;
  virtual void dropout(std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                       std::int64_t row_offset, const void* x, void* y, std::uint8_t* mask) = 0;
  // ---- Backward (kernels/tokenwise's backward ops; gradients of sum(dy * y)).
  // Scratch bytes layernorm_backward needs for `rows` rows (0 on the CPU).
  virtual std::size_t layernorm_workspace_bytes(std::int64_t rows) const = 0;
  // dx and the weight / bias gradients summed over these rows (overwritten).
  virtual void layernorm_backward(std::int64_t rows, std::int64_t cols, const void* x,
                                  const void* gamma, const void* dy, void* dx, void* dgamma,
                                  void* dbeta, void* workspace) = 0;
  virtual void gelu_backward(std::int64_t n, const void* x, const void* dy, void* dx) = 0;
  virtual void dropout_backward(std::int64_t n, float p, const std::uint8_t* mask, const void* dy,
                                void* dx) = 0;
  // In place on g [rows, cols]: from the gradient of the attention dropout's output to that of
  // the scores (softmax input), with the stored softmax and dropout mask.
  virtual void softmax_dropout_backward(std::int64_t rows, std::int64_t cols, float p,
                                        const void* probs, const std::uint8_t* mask, void* g) = 0;
  // The fused path's backward (grad_type, backward_delta, backward, accumulate).
  kernels::AttentionEngine& attention_engine() { return *attn_; }

  // Fused attention through the ops' AttentionEngine (--attn-kernel); `mask` is the block's
  // structure (the layer's own block: causal top-left, or full).
  void attention(const kernels::AttentionParams& p, kernels::BlockMask mask, const void* q,
                 const void* k, const void* v, const std::int64_t* q_pos, const std::int64_t* k_pos,
                 void* o, void* lse) {
    attn_->forward(p, mask, q, k, v, q_pos, k_pos, o, lse);
  }
  // The engine behind attention(): its name and library version go into the results file.
  const kernels::AttentionEngine& attention_engine() const { return *attn_; }
  virtual void attention_unfused(const kernels::AttentionParams& p, float dropout_p,
                                 std::uint64_t seed, int head_offset, const void* q, const void* k,
                                 const void* v, const std::int64_t* q_pos,
                                 const std::int64_t* k_pos, void* probs, std::uint8_t* mask,
                                 void* probs_dropped, void* o, void* lse) = 0;

 protected:
  explicit LayerOps(std::unique_ptr<kernels::AttentionEngine> attn) : attn_(std::move(attn)) {}

 private:
  std::unique_ptr<kernels::AttentionEngine> attn_;
};

std::unique_ptr<LayerOps> make_cpu_layer_ops(DType dtype);
// Modeled compute (SMPI build, --sim-flops): GEMM and attention FLOPs injected, nothing computed.
std::unique_ptr<LayerOps> make_modeled_layer_ops(DType dtype);
// Throws UsageError when the build has no CUDA; std::invalid_argument when the attention
// kernel asked for is unavailable (make_cuda_attention_engine's message).
std::unique_ptr<LayerOps> make_cuda_layer_ops(Device& device, DType dtype,
                                              kernels::AttnKernelChoice attn);

// The CPU backend has one attention kernel (the tiled one), whatever `attn` says; under
// modeled compute none runs.
inline std::unique_ptr<LayerOps> make_layer_ops(
    Device& device, DType dtype,
    kernels::AttnKernelChoice attn = kernels::AttnKernelChoice::automatic) {
  if (device.backend() == Backend::cuda) return make_cuda_layer_ops(device, dtype, attn);
  return sim::modeled() ? make_modeled_layer_ops(dtype) : make_cpu_layer_ops(dtype);
}

}  // namespace suite::sp_tp

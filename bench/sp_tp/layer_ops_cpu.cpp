#include <stdexcept>

#include "bench/sp_tp/layer_ops.hpp"
#include "common/harness/errors.hpp"
#include "kernels/attention/attention_cpu.hpp"
#include "kernels/gemm/gemm_cpu.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"

namespace suite::sp_tp {
namespace {

namespace k = kernels::cpu;

template <class T>
class CpuLayerOps final : public LayerOps {
 public:
  explicit CpuLayerOps(DType dtype) : LayerOps(kernels::make_cpu_attention_engine(dtype)) {}
  void gemm_ex(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t kk, double alpha,
               const void* a, std::int64_t lda, const void* b, std::int64_t ldb, double beta,
               void* c, std::int64_t ldc) override {
    k::gemm<T>(ta, tb, m, n, kk, static_cast<T>(alpha), in(a), lda, in(b), ldb,
               static_cast<T>(beta), out(c), ldc);
  }
  void layernorm(std::int64_t rows, std::int64_t cols, const void* x, const void* gamma,
                 const void* beta, void* y) override {
    k::layernorm_forward<T>(rows, cols, in(x), in(gamma), in(beta), T(1e-5), out(y));
  }
  void gelu(std::int64_t n, const void* x, void* y) override {
    k::gelu_forward<T>(n, in(x), out(y));
  }
  void residual_add(std::int64_t n, const void* x, const void* r, void* y) override {
    k::residual_add<T>(n, in(x), in(r), out(y));
  }
  void dropout(std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
               std::int64_t row_offset, const void* x, void* y, std::uint8_t* mask) override {
    k::dropout_forward<T>(rows, cols, p, seed, row_offset, in(x), out(y), mask);
  }
  std::size_t layernorm_workspace_bytes(std::int64_t) const override { return 0; }
  void layernorm_backward(std::int64_t rows, std::int64_t cols, const void* x, const void* gamma,
                          const void* dy, void* dx, void* dgamma, void* dbeta, void*) override {
    k::layernorm_backward<T>(rows, cols, in(x), in(gamma), in(dy), T(1e-5), out(dx), out(dgamma),
                             out(dbeta));
  }
  void gelu_backward(std::int64_t n, const void* x, const void* dy, void* dx) override {
    k::gelu_backward<T>(n, in(x), in(dy), out(dx));
  }
  void dropout_backward(std::int64_t n, float p, const std::uint8_t* mask, const void* dy,
                        void* dx) override {
    k::dropout_backward<T>(n, p, mask, in(dy), out(dx));
  }
  void softmax_dropout_backward(std::int64_t rows, std::int64_t cols, float p, const void* probs,
                                const std::uint8_t* mask, void* g) override {
    k::softmax_dropout_backward<T>(rows, cols, p, in(probs), mask, out(g));
  }
  void attention_unfused(const kernels::AttentionParams& p, float dropout_p, std::uint64_t seed,
                         int head_offset, const void* q, const void* kk, const void* v,
                         const std::int64_t* q_pos, const std::int64_t* k_pos, void* probs,
                         std::uint8_t* mask, void* probs_dropped, void* o, void* lse) override {
    k::attention_unfused<T>(p, dropout_p, seed, head_offset, in(q), in(kk), in(v), q_pos, k_pos,
                            out(probs), mask, out(probs_dropped), out(o), out(lse));
  }

 private:
  static const T* in(const void* p) { return static_cast<const T*>(p); }
  static T* out(void* p) { return static_cast<T*>(p); }
};

}  // namespace

std::unique_ptr<LayerOps> make_cpu_layer_ops(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return std::make_unique<CpuLayerOps<float>>(dtype);
    case DType::fp64:
      return std::make_unique<CpuLayerOps<double>>(dtype);
    default:
      throw UsageError("the CPU layer runs in fp32 or fp64, not " + std::string(dtype_name(dtype)));
  }
}

#if !defined(SUITE_HAVE_CUDA)
std::unique_ptr<LayerOps> make_cuda_layer_ops(Device&, DType, kernels::AttnKernelChoice) {
  throw UsageError("this build has no CUDA: the layer runs on the CPU backend only");
}
#endif

}  // namespace suite::sp_tp

// Modeled compute for the MoE layer (SMPI build, --sim-flops; common/sim.hpp): every GEMM is
// skipped and its 2mnk FLOPs injected at F, except the router's logits, which decide the
// routing and hence the bytes: those are computed on the host (and their FLOPs injected too),
// followed by the real softmax and top-k. Element-wise ops are skipped (no simulated time).
#include "bench/moe/moe_ops.hpp"

namespace suite::moe {
namespace {

class ModeledMoeOps final : public MoeOps {
 public:
  explicit ModeledMoeOps(DType dtype) : host_(make_cpu_moe_ops(dtype)) {}
  void gemm_ex(bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, const void*, const void*,
               double, void*) override {
    sim::inject_flops(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k));
  }
  void router_logits(std::int64_t tokens, std::int64_t experts, std::int64_t h, const void* x,
                     const void* w, void* logits) override {
    host_->gemm(tokens, experts, h, x, w, logits);
    gemm_ex(false, false, tokens, experts, h, x, w, 0.0, logits);
  }
  void router(std::int64_t tokens, int experts, int k, const void* logits, const float* logit_bias,
              const float* select_bias, std::int32_t* chosen, float* gates,
              float* prob_sum) override {
    host_->router(tokens, experts, k, logits, logit_bias, select_bias, chosen, gates, prob_sum);
  }
  void gather_rows(std::int64_t, std::int64_t, const std::int64_t*, const void*, void*) override {}
  void combine(std::int64_t, int, std::int64_t, const std::int64_t*, const float*, const void*,
               void*) override {}
  void gelu(std::int64_t, const void*, void*) override {}
  void silu_mul(std::int64_t, std::int64_t, const void*, void*) override {}
  void combine_backward(std::int64_t, int, std::int64_t, const std::int64_t*, const float*,
                        const void*, const void*, void*, float*) override {}
  void router_backward(std::int64_t, int, int, const void*, const float*, const std::int32_t*,
                       const float*, const float*, void*) override {}
  void gelu_backward(std::int64_t, const void*, const void*, void*) override {}
  void silu_mul_backward(std::int64_t, std::int64_t, const void*, const void*, void*) override {}
  void zero(void*, std::size_t) override {}

 private:
  std::unique_ptr<MoeOps> host_;  // the CPU ops, for the routing
};

}  // namespace

std::unique_ptr<MoeOps> make_modeled_moe_ops(DType dtype) {
  return std::make_unique<ModeledMoeOps>(dtype);
}

}  // namespace suite::moe

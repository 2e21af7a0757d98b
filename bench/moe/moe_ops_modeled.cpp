// Modeled compute for the MoE layer (SMPI build, --sim-flops; common/sim/sim.hpp): every GEMM is
// skipped and its 2mnk FLOPs injected at F, the router's logits included: modeled tensors hold
// no values, so MoeLayer::route draws the logits instead (moe_config.hpp's drawn_logits) and
// routes them on the host. Element-wise ops are skipped (no simulated time).
#include <stdexcept>

#include "bench/moe/moe_ops.hpp"

namespace suite::moe {
namespace {

class ModeledMoeOps final : public MoeOps {
 public:
  void gemm_ex(bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, const void*, const void*,
               double, void*) override {
    sim::inject_flops(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k));
  }
  // Only the FLOPs: x holds no values (the layer draws the logits).
  void router_logits(std::int64_t tokens, std::int64_t experts, std::int64_t h, const void* x,
                     const void* w, void* logits) override {
    gemm_ex(false, false, tokens, experts, h, x, w, 0.0, logits);
  }
  void router(std::int64_t, int, int, const void*, const float*, const float*, std::int32_t*,
              float*, float*, kernels::moe::GroupLimit) override {
    throw std::logic_error("moe: modeled compute routes drawn logits in MoeLayer::route");
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
};

}  // namespace

std::unique_ptr<MoeOps> make_modeled_moe_ops(DType) {
  return std::make_unique<ModeledMoeOps>();
}

}  // namespace suite::moe

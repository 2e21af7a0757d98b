// Modeled compute for the transformer layer (SMPI build, --sim-flops; common/sim/sim.hpp): every
// GEMM is skipped and its 2mnk FLOPs injected at F; attention goes through the modeled attention
// engine (4 d a FLOPs per visible pair forward, 10 d a backward); the unfused attention, which
// computes every (query, key) pair and masks afterwards, injects 4 d a per pair of its block.
// Element-wise ops (LayerNorm, GeLU, dropout, residual adds, their backwards) take no simulated
// time: tensors hold no values and the GEMMs dominate. The layer's schedule, its collectives and
// their bytes are the executed layer's.
#include "bench/sp_tp/layer_ops.hpp"
#include "common/sim/sim.hpp"

namespace suite::sp_tp {
namespace {

class ModeledLayerOps final : public LayerOps {
 public:
  explicit ModeledLayerOps(DType dtype) : LayerOps(sim::make_modeled_attention_engine(dtype)) {}
  void gemm_ex(bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, double, const void*,
               std::int64_t, const void*, std::int64_t, double, void*, std::int64_t) override {
    sim::inject_flops(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k));
  }
  void layernorm(std::int64_t, std::int64_t, const void*, const void*, const void*,
                 void*) override {}
  void gelu(std::int64_t, const void*, void*) override {}
  void residual_add(std::int64_t, const void*, const void*, void*) override {}
  void dropout(std::int64_t, std::int64_t, float, std::uint64_t, std::int64_t, const void*, void*,
               std::uint8_t*) override {}
  std::size_t layernorm_workspace_bytes(std::int64_t) const override { return 0; }
  void layernorm_backward(std::int64_t, std::int64_t, const void*, const void*, const void*, void*,
                          void*, void*, void*) override {}
  void gelu_backward(std::int64_t, const void*, const void*, void*) override {}
  void dropout_backward(std::int64_t, float, const std::uint8_t*, const void*, void*) override {}
  void softmax_dropout_backward(std::int64_t, std::int64_t, float, const void*, const std::uint8_t*,
                                void*) override {}
  void attention_unfused(const kernels::AttentionParams& p, float, std::uint64_t, int, const void*,
                         const void*, const void*, const std::int64_t*, const std::int64_t*, void*,
                         std::uint8_t*, void*, void*, void*) override {
    sim::inject_flops(4.0 * p.head_dim * p.heads * static_cast<double>(p.cq) *
                      static_cast<double>(p.ck));
  }
};

}  // namespace

std::unique_ptr<LayerOps> make_modeled_layer_ops(DType dtype) {
  return std::make_unique<ModeledLayerOps>(dtype);
}

}  // namespace suite::sp_tp

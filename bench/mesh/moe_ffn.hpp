// The MoE layer in place of the block's MLP, as the layer's part (sp_tp/layer_parts.hpp):
// moe's MoeLayer on the expert group of the device mesh, fed this rank's sequence-parallel rows
// (its c b / T tokens) and handing back the gate-weighted expert output; its backward takes the
// output gradient and gives the input gradient. The layer is moe's own code (flat or
// hierarchical dispatch); this file only copies rows in and out of its buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "bench/moe/moe_layer.hpp"
#include "bench/sp_tp/layer_parts.hpp"

namespace suite::mesh {

class MoeFfn final : public sp_tp::FfnPart {
 public:
  // group: the expert group (cfg.n_e ranks); comms: its node and rail groups for hierarchical
  // dispatch. first_token keys the drawn router logits of modeled compute.
  MoeFfn(const moe::MoeConfig& cfg, Device& device, Comm& group, moe::NodeComms comms,
         std::int64_t first_token);

  void forward(const void* in, void* out, PhaseTimer& phases) override;
  void backward(const void* d_out, void* d_in, PhaseTimer& phases) override;

  moe::MoeLayer& layer() { return *layer_; }
  const moe::MoeLayer& layer() const { return *layer_; }
  // Every global expert's weights and summed gradients from this rank's slots, gathered over
  // the expert group: expert e's w1 at [e], its w2 at [E + e]. Collective over the group.
  std::vector<std::vector<double>> gathered_experts(bool grad);

 private:
  moe::MoeConfig cfg_;
  Device& device_;
  std::unique_ptr<moe::MoeOps> ops_;
  std::unique_ptr<moe::MoeLayer> layer_;
  std::size_t row_bytes_ = 0;
};

}  // namespace suite::mesh

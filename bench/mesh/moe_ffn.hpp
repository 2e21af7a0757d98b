// The MoE layer in place of the block's MLP, as the layer's part (sp_tp/layer_parts.hpp):
// moe's MoeLayer on the expert group of the device mesh, fed this rank's sequence-parallel rows
// (its c b / T tokens) and handing back the gate-weighted expert output; its backward takes the
// output gradient and gives the input gradient. The layer is moe's own code (flat or
// hierarchical dispatch); this file only copies rows in and out of its buffers. With
// cfg.microbatches = 2 (--moe-overlap two-batch) the layer's rows are cut in two by moe's
// MicrobatchPipeline, whose pieces the block's schedule runs (block_overlap.hpp) through parts
// of its own; forward and backward are then not used.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "bench/moe/moe_layer.hpp"
#include "bench/moe/moe_microbatch.hpp"
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

  // Rows [part T / M, (part + 1) T / M) of the layer's input, output, output gradient and input
  // gradient (M = cfg.microbatches) from and to the block's buffers.
  void copy_input(const void* in, int part, PhaseTimer& phases);
  void copy_output(void* out, int part, PhaseTimer& phases);
  void copy_grad_output(const void* d_out, int part, PhaseTimer& phases);
  void copy_grad_input(void* d_in, int part, PhaseTimer& phases);

  moe::MoeLayer& layer() { return *layer_; }
  const moe::MoeLayer& layer() const { return *layer_; }
  // The micro-batches (cfg.microbatches > 1), else null.
  moe::MicrobatchPipeline* pipeline() { return pipeline_.get(); }
  // The last step's exchange bytes as the routing implies them, and the transport's count of
  // the rows' (dispatch and combine; the backward's with `backward`), over the micro-batches.
  moe::StepBytes implied_bytes(bool backward) const;
  moe::StepBytes measured_bytes(bool backward) const;
  // The router's choice of the last step, [T, k], in the rank's token order.
  std::vector<std::int32_t> chosen() const;
  // Every global expert's weights and summed gradients from this rank's slots, gathered over
  // the expert group: expert e's w1 at [e], its w2 at [E + e]. Collective over the group.
  std::vector<std::vector<double>> gathered_experts(bool grad);

 private:
  moe::MoeConfig cfg_;
  Device& device_;
  std::unique_ptr<moe::MoeOps> ops_;
  std::unique_ptr<moe::MoeLayer> layer_;
  std::unique_ptr<moe::MicrobatchPipeline> pipeline_;
  std::size_t row_bytes_ = 0;
  // Byte offset and size of micro-batch `part`'s rows in the layer's [T, h] buffers.
  std::size_t part_offset(int part) const { return static_cast<std::size_t>(part) * part_bytes(); }
  std::size_t part_bytes() const;
};

}  // namespace suite::mesh

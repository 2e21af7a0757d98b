// A transformer layer as one layer of a pipeline stage, which holds several micro-batches in
// flight: the input and the output gradient set per micro-batch, the forward's saved
// activations (the ledger) copied into a slot of their own when the forward ends and back just
// before that micro-batch's backward, and the weight gradients summed over the micro-batches.
// The copies live in the layer's allocator (Role::stashed), so its in-use bytes are the stage's
// activations of every micro-batch in flight. Under modeled compute no copy is made (no value
// is read back): held() and the ledger still count them.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/sp_tp/transformer_layer.hpp"

namespace suite::sp_tp {

class LayerMicrobatches {
 public:
  LayerMicrobatches(TransformerLayer& layer, LayerOps& ops);

  // This rank's token-wise rows of the micro-batch's input / output gradient, on the host.
  void set_input(const std::vector<double>& rows);
  void set_output_grad(const std::vector<double>& rows);
  // After a forward: its ledger into `slot`. Before that micro-batch's backward: back.
  void stash(int slot);
  void restore(int slot);
  // Micro-batches held in slots now.
  int held() const { return held_; }
  // Bytes of one micro-batch's ledger.
  std::int64_t slot_bytes() const;

  // Sums the last backward's weight gradients into the step's (the first call of a step copies).
  void accumulate();
  // Starts a step: the next accumulate() starts the sums afresh.
  void begin_step() { summed_ = 0; }
  // Writes the step's sums into the layer's gradient buffers (zero when no micro-batch
  // counted), where grad_buffers(), param_grad() and gathered_param() read them; with
  // `replicas`, summed over that group too (the ranks holding the same weights on other tokens).
  void finish_step(Comm* replicas = nullptr);

 private:
  void upload(const Buffer& dst, const std::vector<double>& rows);
  const Buffer& sum_buffer(const TransformerLayer::GradBuffer& g);

  TransformerLayer& layer_;
  LayerOps& ops_;
  std::size_t e_;
  int held_ = 0;
  int summed_ = 0;  // micro-batches in the step's sums
};

}  // namespace suite::sp_tp

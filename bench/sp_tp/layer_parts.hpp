// What a composed block plugs into the transformer layer (the mesh benchmark, METHODS.md
// section 6): attention over a context-parallel group in place of the layer's own attention
// over its s tokens, a mixture-of-experts layer in place of its MLP, and the global rows of its
// tokens. Each part brings its own communicator and times its own phases; the layer keeps its
// LayerNorms, projections, residuals and TP / TP+SP collectives around them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/harness/phase_timer.hpp"

namespace suite::sp_tp {

// Between the QKV projection and the output projection. Rows are the layer's (token * b +
// batch over this rank's tokens); qkv holds this rank's Q heads, then its K and V heads.
class AttentionPart {
 public:
  virtual ~AttentionPart() = default;
  // qkv [rows, qkv_cols(t)] -> out [rows, h/t]. The part keeps what its backward needs (the
  // layer then saves no Q, K, V or lse of its own).
  virtual void forward(const void* qkv, void* out, PhaseTimer& phases) = 0;
  // d_out [rows, h/t] -> d_qkv [rows, qkv_cols(t)] (overwritten).
  virtual void backward(const void* d_out, void* d_qkv, PhaseTimer& phases) = 0;
};

// In place of fc1, GeLU and fc2 with their collectives (TP+SP only): from the second
// LayerNorm's output on this rank's sequence-parallel rows [s b / t, h] to the sublayer's
// output on the same rows, before dropout and the residual.
class FfnPart {
 public:
  virtual ~FfnPart() = default;
  virtual void forward(const void* in, void* out, PhaseTimer& phases) = 0;
  // The part keeps its input for the backward (the layer then saves no LayerNorm output).
  virtual void backward(const void* d_out, void* d_in, PhaseTimer& phases) = 0;
};

struct LayerParts {
  AttentionPart* attention = nullptr;
  FfnPart* ffn = nullptr;
  // The global row of each of this rank's token-wise rows, which keys the values of its input
  // and output gradient (empty: consecutive rows from the rank's first). Dropout must be 0 with
  // them: its masks are keyed by consecutive rows.
  std::vector<std::int64_t> global_rows;
  // Called in the backward as each gradient is final (a data-parallel sum may start on it):
  // "w_fc2", "w_fc1", "ffn" (the FfnPart's, after its backward), "w_out", "w_qkv", then
  // "layernorm" (after its TP sum).
  std::function<void(const std::string&)> grad_ready;
};

}  // namespace suite::sp_tp

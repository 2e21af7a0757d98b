// The backward pass of the TP / TP+SP transformer layer (METHODS.md section 5), from the
// activation ledger only: the gradients of sum(d_output * output) with respect to the input and
// every weight.
//   tp:    the input gradient before each column-parallel matmul is all-reduced (2 all-reduces);
//   tp_sp: the output gradient of each row-parallel matmul is all-gathered along s (g_bar's
//          backward), the input gradient of each column-parallel matmul reduce-scattered (g's
//          backward), and each LayerNorm output shard all-gathered again for the column-parallel
//          weight gradients (2 RS + 4 AG); the LayerNorm weight and bias gradients, partial sums
//          over the rank's tokens, are all-reduced over the group (one call, 4h elements).
// TP sums its LayerNorm weight gradients over the same t row blocks in rank order, so with two
// ranks TP and TP+SP agree to the bit (a + b either way).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "bench/sp_tp/layer_comm.hpp"
#include "bench/sp_tp/layer_config.hpp"
#include "bench/sp_tp/layer_memory.hpp"
#include "bench/sp_tp/layer_ops.hpp"
#include "bench/sp_tp/layer_parts.hpp"
#include "common/harness/phase_timer.hpp"

namespace suite::sp_tp {

// The weights the backward reads (this rank's slices; no fc1 / fc2 when a part replaces the
// MLP) and the token positions of attention.
struct LayerWeights {
  const void *ln1_gamma, *ln2_gamma, *w_qkv, *w_out, *w_fc1, *w_fc2;
  const std::int64_t* positions;
};

// Where the gradients go (overwritten): ln [4, h] = ln1 gamma, ln1 beta, ln2 gamma, ln2 beta
// (whole on every rank); the weight slices' gradients; the input gradient (this rank's rows).
struct LayerGrads {
  void *ln, *w_qkv, *w_out, *w_fc1, *w_fc2, *input;
};

struct BackwardSetup {
  const LayerConfig& cfg;
  Variant variant;
  int t;
  std::int64_t local_rows;
  Device& device;
  LayerOps& ops;
  LayerComm& comm;
  Scratch scratch;
  bool overlap;  // LayerNorm-output all-gathers overlapped with the input-gradient GEMMs
  AttentionPart* attention = nullptr;  // the layer's parts (layer_parts.hpp), if any
  FfnPart* ffn = nullptr;
  const std::function<void(const std::string&)>* grad_ready = nullptr;
};

// Phases: "bwd_compute", "bwd_comm" (blocking collectives and the waits of the overlapped
// all-gathers: the exposed communication) and "bwd_ln_gather_exposed" (the LayerNorm-output
// all-gathers' exposed part alone). Throws LedgerMiss if `ledger` lacks a tensor it needs.
void layer_backward(const BackwardSetup& setup, const Ledger& ledger, const LayerWeights& w,
                    const void* d_out, const LayerGrads& grads, PhaseTimer& phases);

}  // namespace suite::sp_tp

// One transformer layer forward over a TP group, in Megatron's two forms:
//   tp:    all-reduce after each row-parallel matmul; LayerNorm/dropout/residual replicated;
//   tp_sp: reduce-scatter (g_bar) after the row-parallel matmuls, the token-wise regions on
//          s/t tokens, all-gather (g) before the column-parallel matmuls.
// Every buffer a backward pass would keep is allocated through the ledger, so the activation
// memory reported is what this layer really holds, tensor by tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sp_tp/layer_config.hpp"
#include "bench/sp_tp/layer_ops.hpp"
#include "common/comm.hpp"
#include "common/phase_timer.hpp"

namespace suite::sp_tp {

struct LedgerEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t bytes;
};

class TransformerLayer {
 public:
  TransformerLayer(const LayerConfig& cfg, Variant variant, Device& device, Comm& comm,
                   LayerOps& ops);

  // One forward pass; compute and communication are timed as phases "compute" and "comm".
  void forward(PhaseTimer& phases);

  const std::vector<LedgerEntry>& ledger() const { return ledger_; }
  std::int64_t ledger_bytes() const;
  // Collective: the layer output for all s*b tokens, on every rank (SP gathers its shards).
  std::vector<double> gathered_output();
  // This rank's layer input and output rows (s*b rows for tp, s*b/t for tp_sp), on the host.
  std::vector<double> local_input() const { return to_host(x_); }
  std::vector<double> local_output() const { return to_host(out_); }

 private:
  Buffer tensor(const std::string& name, std::vector<std::int64_t> shape, std::size_t elem,
                bool saved);
  void upload(Buffer& dst, const std::vector<double>& values);
  void attention();
  void* at(const Buffer& b, std::int64_t elems) const;
  std::vector<double> to_host(const Buffer& b) const;

  LayerConfig cfg_;
  Variant variant_;
  Device& device_;
  Comm& comm_;
  LayerOps& ops_;
  std::vector<LedgerEntry> ledger_;
  std::int64_t local_rows_ = 0;  // rows of the token-wise regions: s*b (tp) or s*b/t (tp_sp)
  std::int64_t row_offset_ = 0;  // global row of this rank's first token-wise row
  std::size_t e_ = 0;

  // Parameters (this rank's slices).
  Buffer ln1_gamma_, ln1_beta_, ln2_gamma_, ln2_beta_, w_qkv_, w_out_, w_fc1_, w_fc2_, positions_;
  // Activations: kept for backward, or temporaries.
  Buffer x_, ln1_, ln1_full_, qkv_, ctx_, lse_, probs_, probs_mask_, probs_dropped_, proj_,
      reduced_, dropped_, mask1_, h1_, ln2_, ln2_full_, fc1_, gelu_, fc2_, mask2_, out_;
};

}  // namespace suite::sp_tp

// One transformer layer over a TP group, in Megatron's two forms:
//   tp:    all-reduce after each row-parallel matmul; LayerNorm/dropout/residual replicated;
//   tp_sp: reduce-scatter (g_bar) after the row-parallel matmuls, the token-wise regions on
//          s/t tokens, all-gather (g) before the column-parallel matmuls.
// forward() then, for a training step, backward() (layer_backward.cpp). Every buffer lives in
// the layer's own allocator (LayerMemory): what the forward keeps for the backward is the
// activation ledger, reported tensor by tensor; the forward's other buffers are released when
// it ends, and the backward receives the ledger (by name), the weights and the output gradient
// and nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sp_tp/layer_comm.hpp"
#include "bench/sp_tp/layer_config.hpp"
#include "bench/sp_tp/layer_memory.hpp"
#include "bench/sp_tp/layer_ops.hpp"
#include "bench/sp_tp/layer_params.hpp"
#include "bench/sp_tp/layer_parts.hpp"
#include "common/harness/phase_timer.hpp"
#include "common/transport/comm.hpp"

namespace suite::sp_tp {

enum PassIndex { kFwd = 0, kBwd = 1 };

class TransformerLayer {
 public:
  // parts: attention and MLP replaced by the caller's, and the rows' global indices
  // (layer_parts.hpp); none by default.
  TransformerLayer(const LayerConfig& cfg, Variant variant, Device& device, Comm& comm,
                   LayerOps& ops, LayerParts parts = {});

  // One forward pass; phases "<prefix>compute" and "<prefix>comm".
  void forward(PhaseTimer& phases, const std::string& prefix = "");
  // The backward of the last forward from the output gradient (Tensor::d_output), receiving
  // only `ledger` of the forward's buffers; phases "bwd_compute", "bwd_comm" and
  // "bwd_ln_gather_exposed". overlap: the LayerNorm-output all-gathers (TP+SP) overlap the
  // input-gradient GEMMs.
  void backward(PhaseTimer& phases, bool overlap);
  void backward(PhaseTimer& phases, bool overlap, const Ledger& ledger);

  Ledger ledger() const { return Ledger(memory_, memory_.ledger_entries()); }
  std::vector<LedgerEntry> ledger_entries() const { return memory_.ledger_entries(); }
  std::int64_t ledger_bytes() const;
  LayerMemory& memory() { return memory_; }
  // Collectives of the last forward / backward.
  const PassComm& pass_comm(PassIndex p) const { return passes_[p]; }
  // The overlapped all-gathers' exchanges since the last call.
  std::vector<Comm::ExchangeTiming> take_exchanges() { return comm_.take_exchanges(); }

  // Collective: the layer output for all s*b tokens, on every rank (SP gathers its shards).
  std::vector<double> gathered_output();
  // Collective: the input gradient for all s*b tokens (after a backward).
  std::vector<double> gathered_grad_input();
  // This rank's rows (s*b for tp, s*b/t for tp_sp) of input, output, output gradient and
  // input gradient, on the host.
  std::vector<double> local_input() const { return to_host(*x_); }
  std::vector<double> local_output() const { return to_host(*out_); }
  std::vector<double> local_d_output() const;
  std::vector<double> local_grad_input() const;

  // Parameters: this rank's slices, their values and (after a backward) gradients.
  const std::vector<ParamSlice>& slices() const { return slices_; }
  std::vector<double> param_value(std::size_t i) const { return to_host(*params_[i], 0); }
  std::vector<double> param_grad(std::size_t i) const;
  // This rank's gradient buffers on the device (after a backward), for sums beyond the TP
  // group (the mesh's data-parallel ones): the four LayerNorm vectors as one [4, h] buffer
  // ("layernorm", whole on every rank), then each weight slice's.
  struct GradBuffer {
    std::string name;
    void* data;
    std::int64_t elems;
  };
  std::vector<GradBuffer> grad_buffers();
  // Allocates the gradients (and the output gradient fed in) now rather than in the first
  // backward, so their buffers can be registered before it runs.
  void allocate_gradients();
  // Collective: the whole global tensor of parameter i (or its gradient) on every rank.
  std::vector<double> gathered_param(std::size_t i, bool grad);

  // Finite differences (collective where it says so): moves every parameter and the input to
  // initial + eps * direction (eps = 0 restores them exactly); the loss sum(d_output * output)
  // over the layer's tokens; the directional derivative <gradients, direction> of the last
  // backward. Replicated tensors count once.
  void set_point(double eps);
  double loss();
  double directional_derivative();

  Variant variant() const { return variant_; }
  Device& device() { return device_; }
  MPI_Comm mpi_comm() const { return comm_.mpi_comm(); }
  const LayerConfig& config() const { return cfg_; }

 private:
  const Buffer* tensor(const std::string& name, std::vector<std::int64_t> shape, std::size_t elem,
                       Role role);
  void upload(const Buffer& dst, const std::vector<double>& values, std::size_t offset = 0);
  void attention();
  void* at(const Buffer& b, std::int64_t elems) const;
  std::vector<double> to_host(const Buffer& b, std::size_t offset = 0,
                              std::size_t count = SIZE_MAX) const;
  double group_sum(double local) const;
  // Values of `t` for this rank's token-wise rows (by their global rows), all h columns.
  std::vector<double> row_values(Tensor t) const;

  LayerConfig cfg_;
  Variant variant_;
  Device& device_;
  LayerOps& ops_;
  LayerMemory memory_;
  LayerComm comm_;
  LayerParts parts_;
  int t_ = 1, rank_ = 0;
  std::int64_t local_rows_ = 0;  // rows of the token-wise regions: s*b (tp) or s*b/t (tp_sp)
  std::int64_t row_offset_ = 0;  // global row of this rank's first token-wise row
  std::size_t e_ = 0;
  PassComm passes_[2];
  std::vector<std::string> temporaries_;  // released when a forward ends

  std::vector<ParamSlice> slices_;
  std::vector<const Buffer*> params_;  // in slices_ order
  const Buffer* positions_ = nullptr;
  // Activations: kept for backward, or temporaries.
  const Buffer *x_ = nullptr, *ln1_ = nullptr, *ln1_full_ = nullptr, *qkv_ = nullptr,
               *ctx_ = nullptr, *lse_ = nullptr, *probs_ = nullptr, *probs_mask_ = nullptr,
               *probs_dropped_ = nullptr, *proj_ = nullptr, *reduced_ = nullptr,
               *dropped_ = nullptr, *mask1_ = nullptr, *h1_ = nullptr, *ln2_ = nullptr,
               *ln2_full_ = nullptr, *fc1_ = nullptr, *gelu_ = nullptr, *fc2_ = nullptr,
               *mask2_ = nullptr, *out_ = nullptr;
  const Buffer* spare_ = nullptr;  // TP+SP overlap: the row-parallel block arriving
  // Backward: the output gradient fed in, and the gradients (allocated on the first backward).
  const Buffer *d_out_ = nullptr, *grad_input_ = nullptr, *grad_ln_ = nullptr;
  std::vector<const Buffer*> grad_weights_;  // w_qkv, w_out, w_fc1, w_fc2 (dense MLP)
};

}  // namespace suite::sp_tp

// The composed block on one rank of the mesh (METHODS.md section 6): sp_tp's TP+SP layer on the
// TP group, its attention a CpAttention on the CP group (C > 1), its MLP an MoeFfn on the expert
// group (with experts), and after the backward the gradient sums over the replica groups. Every
// part is its own benchmark's code taking its axis's communicator from the DeviceMesh. Under
// --moe-overlap two-batch the layer is two, one per micro-batch of b/2 sequences, whose MoE
// parts the two-batch schedule runs (block_overlap.hpp); with CP each has its own CpAttention
// over the CP group on its b/2 sequences (the Q, K, V and lse its backward reads are its own);
// their weights are the same and the second's gradients are added to the first's as each is
// final.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/mesh/block_overlap.hpp"
#include "bench/mesh/cp_attention.hpp"
#include "bench/mesh/grad_sums.hpp"
#include "bench/mesh/mesh_config.hpp"
#include "bench/mesh/moe_ffn.hpp"
#include "bench/sp_tp/layer_ops.hpp"
#include "bench/sp_tp/transformer_layer.hpp"
#include "common/harness/context.hpp"
#include "common/mesh/device_mesh.hpp"

namespace suite::mesh {

// The gradient-sum groups, by the phase that times each.
inline constexpr const char* kSumTp = "grad_sum_tp";          // router, over TP
inline constexpr const char* kSumDense = "grad_sum_dense";    // dense weights, over DP x CP
inline constexpr const char* kSumExpert = "grad_sum_expert";  // experts, over their copies

class ComposedBlock {
 public:
  // Collective over the job (the parts' communicators and sub-groups).
  ComposedBlock(const MeshConfig& cfg, BenchContext& ctx, DeviceMesh& mesh);

  // Phases: the layer's (fwd_compute, fwd_comm, ...), the CP part's (cp_attention, cp_copy; or
  // Ulysses' pack, a2a_q, ...), the MoE's (route, dispatch, expert, combine, ...).
  void forward(PhaseTimer& phases);
  // The backward (phases bwd_...) and the gradient sums (grad_sum_tp, grad_sum_dense,
  // grad_sum_expert: the waits at its end; with --grad-bucket, grad_sum_start where buckets
  // start during it).
  void backward(PhaseTimer& phases);

  // The first micro-batch's layer (the only one without --moe-overlap): its weights, and after
  // a backward the whole rank's weight gradients.
  sp_tp::TransformerLayer& layer() { return *layers_.front(); }
  // This rank's rows of the input, output, output gradient and input gradient, over the
  // micro-batches (in global_rows order).
  enum class Rows { input, output, d_output, grad_input };
  std::vector<double> local_rows(Rows which) const;
  // The activations every micro-batch's layer keeps for its backward.
  std::int64_t ledger_bytes() const;
  // TP bytes the last backward's micro-batches after the first sent to all-reduce their own
  // LayerNorm gradients (the only bytes two micro-batches add on TP).
  std::int64_t extra_tp_bytes() const;
  // --moe-overlap two-batch: one step run eagerly, its pieces timed alone (collective).
  TwoBatchProfile profile_two_batch();
  sp_tp::LayerOps& layer_ops() { return *ops_; }
  // The CP attention of each micro-batch's layer (empty with C = 1).
  const std::vector<std::unique_ptr<CpAttention>>& attentions() const { return attentions_; }
  // The CP methods' own buffers over the micro-batches (CpAttention::method_bytes).
  std::int64_t cp_method_bytes() const;
  MoeFfn* moe() { return moe_.get(); }
  const GradientSums& sums() const { return sums_; }
  // The global row (position p, global batch index g: p D b + g) of each of this rank's
  // token-wise rows: where its input, output and their gradients sit in the single-rank block.
  const std::vector<std::int64_t>& global_rows() const { return global_rows_; }
  const DeviceMesh& mesh() const { return mesh_; }

 private:
  MeshConfig cfg_;
  BenchContext& ctx_;
  DeviceMesh& mesh_;
  std::unique_ptr<sp_tp::LayerOps> ops_;
  std::unique_ptr<kernels::AttentionEngine> engine_;
  std::vector<std::unique_ptr<CpAttention>> attentions_;  // per micro-batch, with CP
  std::unique_ptr<MoeFfn> moe_;
  std::unique_ptr<TwoBatchSchedule> two_batch_;
  std::vector<std::unique_ptr<sp_tp::TransformerLayer>> layers_;  // per micro-batch
  std::vector<std::int64_t> global_rows_;
  GradientSums sums_;
  bool sums_added_ = false;
  PhaseTimer* phases_ = nullptr;  // the backward's, while it runs (the buckets' starts)
  void add_sums();
  void gradient_ready(const std::string& name);
};

// The layer's ops for the block's dtype and attention kernel (UsageError where they cannot start).
std::unique_ptr<sp_tp::LayerOps> make_ops(Device& device, const MeshConfig& cfg);
// The global row (position p, global batch index g: p D b + g) of each token-wise row of TP rank
// `tp` on DP rank `dp`, whose CP rank holds the tokens at `positions`.
// With m micro-batches, micro-batch i's rows (sequences i b/m to (i + 1) b/m - 1 of the rank's).
std::vector<std::int64_t> token_rows(const MeshConfig& cfg,
                                     const std::vector<std::int64_t>& positions, int tp, int dp,
                                     int i = 0, int m = 1);

// The rows of the single-rank block (T = C = D = 1 over the global batch of D b sequences):
// the reference the composed block must equal. Runs on this rank alone.
struct ReferenceBlock {
  std::vector<double> output, grad_input;  // [s D b, h], row p D b + g
  // Every weight's value and gradient, whole: the layer's by slice name (layernorm: the four
  // vectors), then router, expert_w1_<e>, expert_w2_<e>.
  std::vector<std::pair<std::string, std::vector<double>>> weights, grads;
};
ReferenceBlock run_reference(const MeshConfig& cfg, BenchContext& ctx);

}  // namespace suite::mesh

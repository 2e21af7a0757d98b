// One MoE layer forward over an expert-parallel group of N_e ranks (METHODS.md section 4):
//   route:    router GEMM [T, h] x [h, E], softmax + top-k + renormalised gates; under a
//             capacity factor the group's (expert, gate) pairs are all-gathered and every rank
//             applies the same drop rule (kernels/moe/moe_index.hpp: lowest gate dropped
//             first, ties by global copy index); then the dispatch plan;
//   permute:  token rows gathered into [destination rank][local expert] order, and on the
//             receiving side regrouped into [local expert][source rank] order;
//   dispatch: per-block counts exchanged (all-to-all), then the rows (all-to-all-v);
//   expert:   per local expert one GEMM [n_j, h] x [h, w1_cols], the activation (GeLU, or
//             SwiGLU's silu(gate) * up), one GEMM [n_j, d_ff] x [d_ff, h];
//   combine:  rows back to received order, the reverse all-to-all-v, the gate-weighted sum.
// A dropped copy contributes nothing (the token keeps its residual path, outside this layer).
//
// The backward (moe_layer_backward.cpp, METHODS.md section 5), of the loss <dY, out> + L_aux
// with dY a seeded output gradient and L_aux = alpha E sum_i f_i P_i (f_i held constant):
//   bwd_combine:  gate gradients <dY_t, y_c> and gate-weighted output gradients in send order,
//                 the all-to-all-v to the experts' ranks with the dispatch counts;
//   bwd_permute:  rows regrouped expert-major, and the input gradients back to received order;
//   bwd_expert:   per local expert dA = dY W2^T, dW2 = A^T dY, the activation's backward,
//                 dW1 = X^T dH, dX = dH W1^T: four GEMMs over its rows (2x the forward FLOPs);
//   bwd_dispatch: the input gradients home with the combine counts, each token's copies summed;
//   bwd_router:   the group's routed counts (f_i) all-gathered, the gates' and softmax's backward
//                 (choice held fixed), dW_router = x^T dz, dx += dz W_router^T.
// Dropped copies carry no gradient (no row, gate gradient 0).
//
// Modeled compute (SMPI build, --sim-flops; common/sim/sim.hpp) holds no tensor values: inputs,
// weights, activations and gradients are allocated (placeholders from 1 MiB on) but never
// filled or read, so the router's logits cannot come from x: they are drawn (drawn_logits in
// moe_config.hpp: keyed by seed, global token and expert) and routed by the same softmax, skew
// bias, selection bias and top-k, and the router GEMM's FLOPs are injected as computed. Only
// the routing is real (its buffers are kept by sim::KeepData or are small), so every byte the
// routing implies is still sent. Under a capacity factor the drops are settled exactly without
// all-gathering the group's routing (settle_drops); each step still makes that all-gather, on
// placeholders, for its bytes and time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/moe/moe_calibrate.hpp"
#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_eplb.hpp"
#include "bench/moe/moe_hierarchical.hpp"
#include "bench/moe/moe_ops.hpp"
#include "common/harness/phase_timer.hpp"
#include "common/transport/comm.hpp"
#include "kernels/moe/moe_cpu.hpp"

namespace suite::moe {

// Bytes this rank handed to the transport in one step, by purpose.
// Backward: by the phase that sends them: control = bwd_router's all-gather of the routed
// counts, combine = output gradients to the experts (the dispatch's route), dispatch = input
// gradients home (the combine's route).
struct StepBytes {
  std::int64_t control = 0;   // counts all-to-all (+ routing all-gather under a capacity)
  std::int64_t dispatch = 0;  // token rows out
  std::int64_t combine = 0;   // expert outputs back
  std::int64_t total() const { return control + dispatch + combine; }
};

// Collective calls of one pass of the step, counted where the layer makes them.
struct CollectiveCalls {
  int all_to_all = 0, all_to_all_v = 0, all_gather = 0;
  int total() const { return all_to_all + all_to_all_v + all_gather; }
};

// The node and rail communicators of hierarchical dispatch (moe_hierarchical.hpp).
struct NodeComms {
  Comm* node = nullptr;
  Comm* rail = nullptr;
};

// A slot of this rank whose expert has a replica on another rank, and the two-rank group of the
// replicas: the backward all-reduces the slot's weight gradients there.
struct ReplicaSync {
  int slot = 0;
  Comm* comm = nullptr;
};

class MoeLayer;

// A micro-batch's layer (moe_microbatch.hpp) works on rows [row0, row0 + its T) of owner's
// input, output and their gradients, with owner's weights, and adds its weight gradients to
// owner's (the first micro-batch writes them); its exchanges start without waiting.
struct MicrobatchOf {
  MoeLayer* owner = nullptr;
  std::int64_t row0 = 0;
};

class MoeLayer {
 public:
  // first_token: global index of this rank's first token (its input rows are keyed by it).
  // comms: required when cfg.dispatch is hierarchical.
  MoeLayer(const MoeConfig& cfg, Device& device, Comm& group, MoeOps& ops, std::int64_t first_token,
           NodeComms comms = {}, MicrobatchOf of = {});

  // Frees the buffers a step grows (the next step grows them again): the whole layer's, once
  // its micro-batches run the steps.
  void release_step_buffers();
  // Route only (the "route" phase of forward; moe_router.cpp): fills the routing arrays below.
  void route();
  // Collective over the group: the most rows any of its ranks sends or receives in one
  // all-to-all-v under the last route() (own rows included, as the transport counts them).
  std::int64_t max_exchange_rows();
  // Modeled compute, dropless: the dispatch's send buffer and the combine's receive buffer,
  // sized now to the k T rows every step sends and gets back, lent to the calibration's
  // all-to-all (calibrate_rates) so that the run maps no placeholders of its own for it.
  // Elsewhere nothing is lent (bytes = 0).
  ExchangeBuffers lend_exchange_buffers();
  void forward(PhaseTimer& phases);
  // The backward of the last forward (cfg.pass == fwd_bwd), on its buffers.
  void backward(PhaseTimer& phases);
  // Where the experts live (default: the block placement): the weights of this rank's slots
  // are made anew; sync lists the slots whose gradients the backward all-reduces.
  void set_placement(const ExpertPlacement& p, std::vector<ReplicaSync> sync);
  const ExpertPlacement& placement() const { return placement_; }
  // The expert of each of this rank's slots (the weights and gradients below, in order).
  std::vector<int> local_experts() const;
  // Bias added to routing scores for the choice only (aux-loss-free balancing).
  void set_select_bias(const std::vector<float>& bias);

  // This rank's routing of its T tokens after the last route(): [T, k] arrays.
  const std::vector<std::int32_t>& chosen() const { return chosen_; }
  const std::vector<float>& gates() const { return gates_; }
  const std::vector<std::uint8_t>& keep() const { return keep_; }
  // Sum over this rank's tokens of each expert's router probability [E].
  const std::vector<float>& prob_sum() const { return prob_sum_; }
  // Rows received per [source rank][local slot] in the last forward().
  const std::vector<std::int64_t>& recv_counts() const { return recv_counts_; }
  const std::vector<std::int64_t>& send_counts() const { return plan_.send_counts; }

  // Transport-counted bytes of the last forward(), and what the routing table implies.
  const StepBytes& measured_bytes() const { return measured_; }
  StepBytes implied_bytes() const;
  // The same for the last backward(): the rows retrace the forward's routes in reverse.
  const StepBytes& measured_bwd_bytes() const { return measured_bwd_; }
  StepBytes implied_bwd_bytes() const;
  // Hierarchical dispatch: the last forward's and backward's bytes by level (dispatch and
  // combine each), and what the routing implies for the same counters ("" when they agree).
  const LevelBytes& fwd_dispatch_levels() const { return levels_[0]; }
  const LevelBytes& fwd_combine_levels() const { return levels_[1]; }
  const LevelBytes& bwd_combine_levels() const { return levels_[2]; }
  const LevelBytes& bwd_dispatch_levels() const { return levels_[3]; }
  std::string level_mismatch() const;
  // Rows this rank's routing sends to other ranks of its node and to other nodes under flat
  // dispatch (one per kept copy), and the distinct (token, other node) pairs hierarchical
  // dispatch sends across instead.
  std::int64_t flat_intra_rows() const;
  std::int64_t flat_inter_rows() const;
  std::int64_t distinct_inter_rows() const;
  // The most nodes any of this rank's tokens chose experts on (drops aside).
  int most_nodes_per_token() const;
  const CollectiveCalls& fwd_calls() const { return fwd_calls_; }
  const CollectiveCalls& bwd_calls() const { return bwd_calls_; }

  // The layer's own buffers, for a caller that feeds it (the mesh's block): its input x and
  // output [T, h]; the output gradient dY fed to the backward and the input gradient dX [T, h];
  // the router weight's gradient [h, E]; each slot's expert weight gradients.
  void* input_buffer() { return x_.data(); }
  const void* output_buffer() const { return out_.data(); }
  void* grad_output_buffer() { return dy_.data(); }
  const void* input_grad_buffer() const { return dx_.data(); }
  void* router_grad_buffer() { return dw_router_.data(); }
  void* expert_w1_grad_buffer(int slot) { return dw1_.at(static_cast<std::size_t>(slot)).data(); }
  void* expert_w2_grad_buffer(int slot) { return dw2_.at(static_cast<std::size_t>(slot)).data(); }
  int slots() const { return slots_; }
  std::vector<double> router_weight() const { return to_host(w_router_, cfg_.h * cfg_.experts); }
  std::vector<double> expert_w1(int j) const;
  std::vector<double> expert_w2(int j) const;

  std::vector<double> local_input() const { return to_host(x_, cfg_.tokens * cfg_.h); }
  std::vector<double> local_output() const { return to_host(out_, cfg_.tokens * cfg_.h); }
  // Expert FLOPs of the last forward on this rank (received rows x per-row FLOPs).
  double expert_flops() const;
  // Expert GEMM FLOPs the last backward issued on this rank (2 m n k per GEMM).
  double bwd_expert_flops() const { return bwd_flops_; }

  // Gradients of the last backward on this rank: dY fed in and dX [T, h]; the router weight's
  // [h, E] (this rank's tokens only: the data-parallel all-reduce of replicated weights is
  // outside the layer); each local expert's [h, w1_cols] and [d_ff, h] (complete: every row
  // the group routed to it); the gates' [T, k] (0 for dropped copies).
  std::vector<double> grad_output() const { return to_host(dy_, cfg_.tokens * cfg_.h); }
  std::vector<double> input_grad() const { return to_host(dx_, cfg_.tokens * cfg_.h); }
  std::vector<double> router_weight_grad() const {
    return to_host(dw_router_, cfg_.h * cfg_.experts);
  }
  std::vector<double> expert_w1_grad(int j) const;
  std::vector<double> expert_w2_grad(int j) const;
  std::vector<float> gate_grad() const;

  // Collective over the group: element-wise sum, and every rank's vector in rank order.
  std::vector<double> group_sum(const std::vector<double>& v);
  std::vector<double> group_gather(const std::vector<double>& v);
  std::vector<std::uint8_t> group_drop_rule();

  int group_rank() const { return rank_; }

 private:
  friend class MicrobatchPipeline;  // runs the phases below micro-batch by micro-batch
  Buffer view_of(const Buffer& b, std::int64_t row0, std::int64_t rows, std::int64_t cols) const;
  void init_experts();
  void sync_replicas();
  void route_drawn();
  void modeled_drops();
  void settle_drops();
  std::uint64_t routing_fingerprint() const;
  void permute_in();
  // Each exchange in two halves: start (its sends posted) and finish (waited for, and what
  // follows it on this rank); the blocking layer runs them back to back.
  void dispatch_start();
  void dispatch_finish();
  void regroup();
  void experts();
  void combine_start();
  void combine_finish();
  void combine_backward_start();
  void combine_backward_finish();
  void regroup_backward();
  void experts_backward();
  void dispatch_backward_start();
  void dispatch_backward_finish();
  void router_backward(const std::vector<float>& prob_grad);
  // The aux loss's gradient on every probability, from this rank's routed copies per expert
  // (the whole rank's: summed over its micro-batches) over `tokens` tokens per rank.
  std::vector<float> aux_loss_prob_grad(const std::vector<double>& routed, std::int64_t tokens);
  std::vector<double> routed_per_expert() const;
  std::int64_t all_to_all_v_bytes(const void* send, const std::vector<std::size_t>& send_elems,
                                  const std::vector<std::size_t>& send_displs, void* recv,
                                  const std::vector<std::size_t>& recv_elems,
                                  const std::vector<std::size_t>& recv_displs);
  void ensure(Buffer& b, std::size_t bytes);
  void upload(Buffer& dst, const void* src, std::size_t bytes);
  void upload_index(Buffer& dst, const void* src, std::size_t bytes);
  void upload_values(Buffer& dst, const std::vector<double>& values);
  std::vector<double> to_host(const Buffer& b, std::int64_t n) const;
  void* row(const Buffer& b, std::int64_t r, std::int64_t cols) const;

  MoeConfig cfg_;
  MicrobatchOf of_;
  int ticket_ = -1;  // the exchange started and not yet finished (-1: none or blocking)
  std::unique_ptr<HierarchicalExchange> hier_;
  ExpertPlacement placement_;
  int slots_ = 1;  // slots (expert weights) per rank: E / N_e, or (E + R) / N_e with replicas
  std::vector<ReplicaSync> replica_sync_;
  std::vector<std::int64_t> copies_before_;  // per expert: copies of earlier micro-batches
  std::vector<std::int32_t> phys_chosen_;    // per copy: its slot (= its expert without replicas)
  LevelBytes levels_[4];
  Device& device_;
  Comm& comm_;
  MoeOps& ops_;
  int rank_ = 0, ranks_ = 1;
  std::size_t e_ = 0;
  std::int64_t capacity_ = -1;
  std::int64_t first_token_ = 0;  // global index of this rank's first token
  // Host copies of the skew and selection biases (modeled compute routes on the host).
  std::vector<float> logit_bias_host_, select_bias_host_;
  // Modeled compute: chosen_, gates_ and prob_sum_ hold the draws for the current selection
  // bias; under a capacity factor, the drops in keep_ were settled for the routing with this
  // fingerprint (set_select_bias resets both).
  bool routing_drawn_ = false, drops_settled_ = false;
  std::uint64_t settled_routing_ = 0;

  // Parameters and fixed inputs.
  Buffer x_, w_router_, logit_bias_, select_bias_;
  std::vector<Buffer> w1_, w2_;
  // Per-step device buffers (grown on demand; sizes repeat from step to step).
  Buffer logits_, chosen_dev_, gates_dev_, prob_sum_dev_, send_src_, slot_pos_, send_, counts_send_,
      counts_recv_, recv_, regroup_gather_, regroup_scatter_, expert_in_, hidden_, act_,
      expert_out_, back_send_, back_recv_, out_, meta_send_, meta_recv_, meta_ph_send_,
      meta_ph_recv_;
  // Backward: dY (fixed), gradients and their per-step buffers (grown on demand).
  Buffer dy_, dx_, dw_router_, gate_grad_dev_, prob_grad_dev_, grad_send_, grad_recv_,
      d_expert_out_, d_act_, d_hidden_, d_expert_in_, d_back_send_, d_back_recv_, dlogits_,
      routed_send_, routed_recv_;
  std::vector<Buffer> dw1_, dw2_;
  Buffer replica_tmp_;  // a replica's all-reduced gradient, before it is copied back

  // Host copies of the routing and plans of the last step.
  std::vector<std::int32_t> chosen_;
  std::vector<float> gates_, prob_sum_;
  std::vector<std::uint8_t> keep_;
  kernels::moe::DispatchPlan plan_;
  kernels::moe::RegroupPlan regroup_;
  std::vector<std::int64_t> recv_counts_;
  std::vector<std::size_t> send_elems_, send_displs_, recv_elems_, recv_displs_;
  std::int64_t recv_rows_ = 0;
  StepBytes measured_, measured_bwd_;
  CollectiveCalls fwd_calls_, bwd_calls_;
  double bwd_flops_ = 0;
};

}  // namespace suite::moe

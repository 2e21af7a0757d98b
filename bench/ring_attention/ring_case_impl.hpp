// RingCase's declaration, shared by its run and check (ring_case.cpp) and its report against
// the formulas (ring_case_report.cpp). Private to bench/ring_attention.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/ring_attention/ring_attention.hpp"
#include "bench/ring_attention/ring_config.hpp"
#include "bench/ring_attention/ring_pass_report.hpp"
#include "bench/ring_attention/ring_reference.hpp"
#include "common/device/attention_select.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

class RingCase final : public BenchCase {
 public:
  RingCase(BenchContext& ctx, RingConfig cfg, kernels::AttnKernelChoice choice)
      : ctx_(ctx), cp_(ctx.comm), cfg_(cfg), choice_(choice) {}

  void setup() override {
    engine_ = make_attention_engine(ctx_.device, cfg_.dtype, choice_);
    ring_ = std::make_unique<RingAttention>(cfg_, ctx_.device, cp_, *engine_, ctx_.opts.seed);
  }

  // The forward, or the forward then the backward as two phases; per-round times are
  // recorded and resolved in report(), outside the timed region.
  void step(PhaseTimer& phases) override;
  CheckOutcome check() override;
  void report(const Measurement& m, CaseRecord& rec) override;
  // Q, K, V, O and lse of this rank's share of the sequence in global token order (with the
  // backward: dO, dQ, dK and dV too): the file's [ranks, n] rows, read in rank order within a
  // group, are the sequence from token 0.
  std::vector<SavedTensor> tensors() override;

 private:
  static double phase(const Measurement& m, const std::string& name);

  double flops_per_pair(double per_d_a) const { return per_d_a * cfg_.head_dim * cfg_.heads; }
  double kv_block_bytes() const {
    return static_cast<double>(cfg_.kv_block_elems()) * static_cast<double>(cfg_.elem());
  }
  double dkv_block_bytes() const {
    return static_cast<double>(cfg_.kv_block_elems()) * static_cast<double>(cfg_.grad_elem());
  }
  // One token's K and V (a group-cast row) in elements of `size` bytes.
  double kv_row_bytes(std::size_t size) const {
    return 2.0 * static_cast<double>(cfg_.kv_row()) * static_cast<double>(size);
  }
  bool balanced() const { return cfg_.causal && cfg_.layout != Layout::contiguous; }
  model::Ring shape() const {
    return {static_cast<double>(cfg_.heads) * cfg_.head_dim,
            static_cast<double>(cfg_.c),
            cfg_.n_c,
            static_cast<double>(cfg_.group()),
            static_cast<double>(cfg_.elem()),
            cfg_.causal};
  }
  // Forward: 4 d a FLOPs per visible pair; the ring moves one K/V block per round but the
  // last, the all-gather variant gathers N_c - 1 blocks before it computes.
  PassCount forward_count() const;
  // Backward: 10 d a FLOPs per visible pair; round k moves the next K/V block (k < N_c - 1)
  // and the partial sums of the block used in round k - 1 (k >= 1); the home hop moves the
  // last partial sums (no work). All-gather: the reduce-scatter of N_c - 1 blocks' partial
  // sums after the compute.
  // Group-cast: round k receives its source's rows and sends their partial sums back; the home
  // round adds what arrived for this rank's rows (no work).
  PassCount backward_count() const;
  // The forward's own figures beyond report_pass: c*, bytes, work balance, memory, overlap.
  void report_forward(const PassRates& f, const std::vector<RoundTimes>& timed, CaseRecord& rec);
  // The backward's own figures: c*_bwd against the forward's, bytes and hops, memory, the
  // training step's total and the gradient check's errors.
  void report_backward(const PassRates& f, const PassRates& b, CaseRecord& rec);

  // What the layout and the documents say of the group-cast (rank 0 counts every rank's rows
  // once, as model --section varlen does; the other ranks write no record): the busiest rank's
  // bytes sent in a forward and a backward, and its buffers.
  struct GroupCastPrediction {
    double bytes_sent = NAN, bytes_received = NAN, bwd_bytes_sent = NAN;
    double memory = NAN, bwd_memory = NAN;
    bool falls_back = false;
    std::int64_t rows_received_max = 0;
  };
  const GroupCastPrediction& group_cast_prediction();
  // The group-cast's own figures: which schedule ran and why, the rows each rank received and
  // sent (counted by the transport, beside the exact figures the layout gives), the ranks it
  // exchanged with, against the ring's bytes.
  void report_group_cast(CaseRecord& rec);
  // One mode of one pass, timed over the same iteration count as the harness's loop (max over
  // ranks per iteration). A backward run first runs its forward in the same mode, untimed.
  ModeRuns run_mode(Mode mode, int iterations, bool backward);
  // How the transfer overlaps the compute, and where the CPU backend does not poll, why.
  std::string overlap_mechanism() const;

  BenchContext& ctx_;
  Comm& cp_;  // the context-parallel group: ctx.comm (BenchDefinition::mesh)
  RingConfig cfg_;
  kernels::AttnKernelChoice choice_;
  std::unique_ptr<kernels::AttentionEngine> engine_;
  std::unique_ptr<RingAttention> ring_;
  std::int64_t fwd_bytes_ = 0, bwd_bytes_ = 0, fwd_recv_ = 0;
  GradientComparison grads_;
  GroupCastPrediction prediction_;
  bool predicted_ = false;
};

}  // namespace suite::ring

// UlyssesCase's declaration, shared by its run and check (ulysses_cases.cpp) and its report
// against the formulas (ulysses_case_report.cpp). Private to bench/ulysses.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "bench/ring_attention/doc_report.hpp"
#include "bench/ring_attention/ring_reference.hpp"
#include "bench/ulysses/ulysses_attention.hpp"
#include "bench/ulysses/ulysses_config.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::ulysses {

// The communicators one (N_c, u) needs: the Ulysses group and the ring across groups (its CP
// mesh's, kept for the run).
struct Groups {
  Comm* ulysses;
  Comm* ring;
};

class UlyssesCase final : public BenchCase {
 public:
  UlyssesCase(BenchContext& ctx, Groups groups, UlyssesConfig cfg, kernels::AttnKernelChoice k)
      : ctx_(ctx), groups_(std::move(groups)), cfg_(cfg), choice_(k) {}

  void setup() override {
    engine_ = make_attention_engine(ctx_.device, cfg_.dtype, choice_);
    method_ = std::make_unique<UlyssesAttention>(cfg_, ctx_.device, *groups_.ulysses, *groups_.ring,
                                                 *engine_, ctx_.opts.seed);
  }

  void step(PhaseTimer& phases) override;
  CheckOutcome check() override;
  // The runs of this rank's rows that hold tokens (doc_zigzag's padding slots hold none).
  std::vector<ring::Segment> token_rows() const;
  void report(const Measurement& m, CaseRecord& rec) override;
  // Packed documents: the ring part's visible pairs per rank and round (plain Ulysses: one
  // round, the whole pack for this rank's heads), and the case's pass against the ideal, one
  // rank's attention of the whole pack for the a / u heads of a ring over its N_c / u ranks
  // (ring_attention's ideal for the ring part's config), with its factors: balance (counted),
  // pair rate (the attention phases' pairs per second over the ideal's; the ring part's
  // transfers run inside those phases, so what they expose lands here) and exchange (the
  // attention phases over the pass: what the all-to-alls, packing and casts add). Names as
  // ring_attention's, `step_eff_*` for the factors of a --pass fwd_bwd step.
  // `totals`: the ring part's, as report_documents counted them.
  void report_against_ideal(const Measurement& m, const ring::WorkTotals& totals, CaseRecord& rec);
  // The group-cast ring part's bytes from the layout (rank 0 counts every rank's rows, as
  // model --section varlen does; NaN elsewhere: only rank 0 writes its record): the busiest
  // rank's in a forward (its rows, e bytes an element), or in a backward (its rows again and
  // the partial sums of the rows it received, e_g bytes an element).
  double group_cast_bytes(bool backward, double e, double e_g) const;

  // The backward: dO's all-to-all carries what Q's did, dQ, dK and dV what the output, K and V
  // did (in the types they travel in); the hybrid's ring moves K/V and the dK/dV partial sums.
  void report_backward(const Measurement& m, CaseRecord& rec, double q_elems, double kv_elems);
  // Q, K, V and O of this rank's share of its group's sequence, in global token order (with
  // the backward: dO, dQ, dK and dV too).
  std::vector<SavedTensor> tensors() override;

 private:
  BenchContext& ctx_;
  Groups groups_;
  UlyssesConfig cfg_;
  kernels::AttnKernelChoice choice_;
  std::unique_ptr<kernels::AttentionEngine> engine_;
  std::unique_ptr<UlyssesAttention> method_;
  std::int64_t ulysses_bytes_ = 0, ring_bytes_ = 0;
  std::int64_t bwd_ulysses_bytes_ = 0, bwd_ring_bytes_ = 0;
  ring::GradientComparison grads_;
};

}  // namespace suite::ulysses

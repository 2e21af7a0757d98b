// MeshCase's declaration, shared by its run and check (mesh_case.cpp), its report against the
// formulas (mesh_case_report.cpp) and its memory accounting (mesh_case_memory.cpp). Private to
// bench/mesh.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/mesh/mesh_block.hpp"
#include "bench/mesh/mesh_config.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "common/mesh/device_meshes.hpp"

namespace suite::mesh {

constexpr std::array<MeshAxis, 4> kAxes = {MeshAxis::tp, MeshAxis::cp, MeshAxis::ep, MeshAxis::dp};

using Named = std::vector<std::pair<std::string, std::vector<double>>>;

// max |a - b| / max(1, max |b|) (NaN or lengths apart: infinitely far).
double relative_error(const std::vector<double>& a, const std::vector<double>& b);

class MeshCase final : public BenchCase {
 public:
  MeshCase(BenchContext& ctx, MeshConfig cfg) : ctx_(ctx), cfg_(std::move(cfg)) {}

  void setup() override {
    ctx_.device.reset_allocation_peak();
    mesh_ = &ctx_.meshes.case_mesh(cfg_.shape);
    mesh_->make_all();
    if (cfg_.two_batch)
      setup_two_batch();
    else
      block_ = std::make_unique<ComposedBlock>(cfg_, ctx_, *mesh_);
  }

  // Phases "fwd" and "bwd" around the block's own (the layer's, the parts', the sums').
  void step(PhaseTimer& phases) override;
  // The output, the input gradient and every weight gradient after the sums against the
  // single-rank block on the same global batch (rank 0 runs it; every rank compares its part).
  CheckOutcome check() override;
  void report(const Measurement& m, CaseRecord& rec) override;
  // Input, output, the output gradient and the input gradient of the whole global batch in the
  // single-rank block's row order (p D b + g), and every weight and its summed gradient whole:
  // the same on every rank.
  std::vector<SavedTensor> tensors() override;

 private:
  std::array<std::int64_t, 4> axis_sent() const;
  model::MeshBlock model_shape() const;
  // The single-rank block's rows of this rank's tokens.
  std::vector<double> reference_rows(const std::vector<double>& whole) const;
  // This rank's token-wise rows of a tensor, gathered from every rank into the whole global
  // batch in the single-rank block's row order. Collective.
  std::vector<double> whole_rows(const std::vector<double>& local) const;
  // Every weight (or its gradient after the sums) whole, named as the reference names them.
  // Collective over the TP group (the layer's slices) and the expert group.
  Named whole_weights(bool grad);
  // Each axis's time in the step and the part of it that nothing hid (medians of the max over
  // ranks per phase, summed): TP's blocking collectives; CP's attention and, for the ring, its
  // waits for the exchange (the all-to-alls for Ulysses); EP's dispatch and combine; the
  // gradient sums.
  void report_times(const Measurement& m, CaseRecord& rec);
  // The ring's waits for its exchanges per timed step (forward and backward), median over the
  // steps, max over ranks.
  double ring_wait_median();
  // Memory per rank: the layer's activation ledger, the weights and gradients, the CP method's
  // own buffers, and the allocator's peak, beside METHODS.md 6's formulas.
  void report_memory(CaseRecord& rec, const model::MeshBlock& mb);
  // --moe-overlap two-batch (mesh_case_overlap.cpp): the block without it on the same tokens
  // first (a warm step, then a timed one whose bytes and values stay), then the two-batch
  // block and its eager profile.
  void setup_two_batch();
  // What differs from the block without it: values (fp64: 1e-12 of the largest), the TP, CP and
  // DP bytes, the MoE rows' bytes ("" when none); the values' error joins the check's.
  std::string two_batch_mismatch();
  void report_two_batch(const Measurement& m, CaseRecord& rec) const;

  BenchContext& ctx_;
  MeshConfig cfg_;
  DeviceMesh* mesh_ = nullptr;  // this case's (DeviceMeshes::case_mesh), dropped after it
  std::unique_ptr<ComposedBlock> block_;
  std::array<std::int64_t, 4> step_bytes_{};
  std::int64_t step_ep_implied_ = 0;
  std::vector<std::pair<std::string, double>> check_errors_;
  struct PlainStep {  // the block without --moe-overlap, on the same tokens
    double step_s = 0;
    std::array<std::int64_t, 4> bytes{};
    moe::StepBytes fwd_rows, bwd_rows;
    bool has_values = false;
    std::vector<double> output, grad_input;
    Named grads;
  };
  PlainStep plain_;
  TwoBatchProfile profile_;
};

}  // namespace suite::mesh

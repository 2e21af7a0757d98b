// MeshCase under --moe-overlap two-batch: the block without it beside the two-batch block on the
// same tokens (its step time, its bytes per axis and its values), and the report of the step
// against the all-to-all A, the compute X and the schedule's critical path (METHODS.md 4).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "bench/mesh/mesh_case_impl.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/run_clock.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::mesh {

void MeshCase::setup_two_batch() {
  MeshConfig plain_cfg = cfg_;
  plain_cfg.two_batch = false;
  block_ = std::make_unique<ComposedBlock>(plain_cfg, ctx_, *mesh_);
  PhaseTimer unused(ctx_.device);
  unused.begin_step();
  step(unused);  // warm
  ctx_.comm.barrier();
  ctx_.device.synchronize();
  const auto t0 = RunClock::now();
  step(unused);
  ctx_.device.synchronize();
  plain_.step_s = max_over_ranks(std::chrono::duration<double>(RunClock::now() - t0).count());
  unused.end_step(false);
  plain_.bytes = step_bytes_;
  plain_.fwd_rows = block_->moe()->measured_bytes(false);
  plain_.bwd_rows = block_->moe()->measured_bytes(true);
  if (!sim::modeled()) {  // the rows whole, in the single-rank block's order
    using Rows = ComposedBlock::Rows;
    plain_.has_values = true;
    plain_.output = whole_rows(block_->local_rows(Rows::output));
    if (cfg_.backward()) {
      plain_.grad_input = whole_rows(block_->local_rows(Rows::grad_input));
      plain_.grads = whole_weights(true);
    }
  }
  block_.reset();
  ctx_.device.reset_allocation_peak();
  block_ = std::make_unique<ComposedBlock>(cfg_, ctx_, *mesh_);
  profile_ = block_->profile_two_batch();
  for (const auto& cp : block_->attentions())  // the ring's waits: the measured steps' only
    cp->collect_times();
}

std::string MeshCase::two_batch_mismatch() {
  std::string why;
  // TP: the second micro-batch's LayerNorm gradients are all-reduced by themselves.
  const std::int64_t extra_tp = block_->extra_tp_bytes();
  for (std::size_t i = 0; i < kAxes.size(); ++i) {
    const std::int64_t extra = kAxes[i] == MeshAxis::tp ? extra_tp : 0;
    if (kAxes[i] != MeshAxis::ep && step_bytes_[i] - extra != plain_.bytes[i])
      why += std::string(mesh_axis_name(kAxes[i])) + " bytes " + std::to_string(step_bytes_[i]) +
             " with two micro-batches (" + std::to_string(extra) + " of them its own) but " +
             std::to_string(plain_.bytes[i]) + " without; ";
  }
  // The rows cut in two: the same exchange bytes (the counts' control exchange doubles).
  auto rows = [&](const char* pass, const moe::StepBytes& two, const moe::StepBytes& one) {
    if (two.dispatch != one.dispatch || two.combine != one.combine)
      why += std::string(pass) + " MoE rows' bytes (dispatch, combine) (" +
             std::to_string(two.dispatch) + ", " + std::to_string(two.combine) +
             ") with two micro-batches but (" + std::to_string(one.dispatch) + ", " +
             std::to_string(one.combine) + ") without; ";
  };
  rows("forward", block_->moe()->measured_bytes(false), plain_.fwd_rows);
  if (cfg_.backward()) rows("backward", block_->moe()->measured_bytes(true), plain_.bwd_rows);
  if (plain_.has_values) {
    using Rows = ComposedBlock::Rows;
    double err = relative_error(whole_rows(block_->local_rows(Rows::output)), plain_.output);

    if (cfg_.backward()) {
      err = std::max(
          err, relative_error(whole_rows(block_->local_rows(Rows::grad_input)), plain_.grad_input));

      const Named grads = whole_weights(true);
      for (std::size_t i = 0; i < grads.size(); ++i)
        err = std::max(err, i < plain_.grads.size()
                                ? relative_error(grads[i].second, plain_.grads[i].second)
                                : INFINITY);
    }
    err = max_over_ranks(err);
    check_errors_.emplace_back("two_batch_vs_none", err);
    // fp64: the summation orders differ only in the weight gradients' micro-batch sums.
    const double tol = cfg_.dtype == DType::fp64 ? 1e-12 : 1e-5;
    if (!(err <= tol))
      why += "output or gradients differ from the block without --moe-overlap by " +
             std::to_string(err) + " of the largest value (tolerance " + std::to_string(tol) +
             "); ";
  }
  return why;
}

void MeshCase::report_two_batch(const Measurement& m, CaseRecord& rec) const {
  if (ctx_.mpi.rank() != 0) return;
  const double step = m.step.median, a = profile_.a2a_s, x = profile_.compute_s;
  auto& at = rec.attrs;
  at.emplace_back("microbatches", std::int64_t{2});
  at.emplace_back("tp_bytes_second_layernorm", static_cast<double>(block_->extra_tp_bytes()));
  at.emplace_back("overlap_a2a_s", a);
  at.emplace_back("overlap_compute_s", x);
  at.emplace_back("exposed_a2a_s", step - x);
  at.emplace_back("step_no_overlap_s", plain_.step_s);
  at.emplace_back("hidden_vs_no_overlap_s", plain_.step_s - step);
  at.emplace_back("pred_step_s", profile_.pred_step_s);
  at.emplace_back("pred_exposed_a2a_s", profile_.pred_step_s - x);
  at.emplace_back("pred_overlap_bound_s", model::moe_overlap_step(a, x, 2));
  at.emplace_back("overlap_exchanges", block_->moe()->pipeline()->overlap_mechanism());
}

}  // namespace suite::mesh

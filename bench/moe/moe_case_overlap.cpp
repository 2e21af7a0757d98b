// MoeCase under --overlap microbatch:M: the pipeline beside one M = 1 step of the same layer
// on the same tokens (its time, its exchange bytes and its values), and the report of the
// exposed all-to-all against the schedule's critical path and METHODS.md section 4's d_ff*.
#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "bench/moe/moe_case_impl.hpp"
#include "bench/moe/moe_reference.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/run_clock.hpp"
#include "common/results/record_access.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::moe {
namespace {

// Largest |a - b| over two equally long vectors, and the largest |b|.
void widen(double& diff, double& scale, const std::vector<double>& a,
           const std::vector<double>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
}

}  // namespace

void MoeCase::setup_overlap(NodeComms comms) {
  // M = 1 on the same tokens: a warm step, then a timed one whose bytes and values stay.
  PhaseTimer unused(ctx_.device);
  auto m1_step = [&] {
    layer_->forward(unused);
    if (cfg_.backward()) layer_->backward(unused);
  };
  m1_step();
  ctx_.comm.barrier();
  ctx_.device.synchronize();
  const auto t0 = RunClock::now();
  m1_step();
  ctx_.device.synchronize();
  step_m1_s_ = max_over_ranks(std::chrono::duration<double>(RunClock::now() - t0).count());
  m1_bytes_ = layer_->measured_bytes();
  m1_bwd_bytes_ = layer_->measured_bwd_bytes();
  std::string why;
  if (!sim::modeled() && cfg_.dropless() && !reference_too_large(cfg_, why)) {
    m1_out_ = layer_->local_output();
    if (cfg_.backward()) m1_grads_ = layer_grads();
  }
  layer_->release_step_buffers();  // the micro-batches hold their own
  pipeline_ = std::make_unique<MicrobatchPipeline>(*layer_, ctx_.device, ctx_.comm, *ops_,
                                                   first_token_, comms);
  pipeline_->set_select_bias(select_bias_);
  pipeline_->follow_placement();
  profile_ = pipeline_->profile();
  profile_.a2a_s = max_over_ranks(profile_.a2a_s);
  profile_.compute_s = max_over_ranks(profile_.compute_s);
  profile_.pred_step_s = max_over_ranks(profile_.pred_step_s);
}

std::string MoeCase::overlap_mismatch() const {
  std::string why;
  // The rows cut in M: the same exchange bytes as M = 1's (the control grows with M).
  auto rows = [&](const char* pass, const StepBytes& mb, const StepBytes& one) {
    if (mb.dispatch != one.dispatch || mb.combine != one.combine)
      why += std::string(pass) + " exchange bytes (dispatch, combine) with micro-batches (" +
             std::to_string(mb.dispatch) + ", " + std::to_string(mb.combine) + ") but M = 1 (" +
             std::to_string(one.dispatch) + ", " + std::to_string(one.combine) + "); ";
  };
  if (cfg_.dropless()) {
    rows("forward", pipeline_->measured_bytes(), m1_bytes_);
    if (cfg_.backward()) rows("backward", pipeline_->measured_bwd_bytes(), m1_bwd_bytes_);
  }
  if (!m1_out_) return why;
  double diff = 0, scale = 1;
  widen(diff, scale, layer_->local_output(), *m1_out_);
  if (m1_grads_) {
    const LayerGrads g = layer_grads();
    widen(diff, scale, g.dx, m1_grads_->dx);
    widen(diff, scale, g.dw_router, m1_grads_->dw_router);
    for (std::size_t j = 0; j < g.dw1.size(); ++j) {
      widen(diff, scale, g.dw1[j], m1_grads_->dw1[j]);
      widen(diff, scale, g.dw2[j], m1_grads_->dw2[j]);
    }
  }
  // fp64: the summation orders differ only in the weight gradients' micro-batch sums.
  const double tol = (cfg_.dtype == DType::fp64 ? 1e-12 : 1e-5) * scale;
  if (!(diff <= tol))
    why += "output or gradients differ from M = 1's by " + std::to_string(diff) + " (tolerance " +
           std::to_string(tol) + "); ";
  return why;
}

void MoeCase::report_overlap(const Measurement& m, CaseRecord& rec) const {
  std::vector<std::int64_t> drops = pipeline_->drops();
  SUITE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, drops.data(), static_cast<int>(drops.size()),
                                MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  if (ctx_.mpi.rank() != 0) return;
  const double step = m.step.median, a = profile_.a2a_s, x = profile_.compute_s;
  const int mb = cfg_.microbatches;
  rec.attrs.emplace_back("microbatches", std::int64_t{mb});
  rec.attrs.emplace_back("overlap_a2a_s", a);
  rec.attrs.emplace_back("overlap_compute_s", x);
  rec.attrs.emplace_back("exposed_a2a_s", step - x);
  rec.attrs.emplace_back("step_m1_s", step_m1_s_);
  rec.attrs.emplace_back("hidden_vs_m1_s", step_m1_s_ - step);
  rec.attrs.emplace_back("pred_step_s", profile_.pred_step_s);
  rec.attrs.emplace_back("pred_exposed_a2a_s", profile_.pred_step_s - x);
  rec.attrs.emplace_back("pred_overlap_bound_s", model::moe_overlap_step(a, x, mb));
  // The crossing from the F and W this record reports (report_case's, over the ranks).
  const double F = attr_number(rec, "calib_flops_per_s"), W = attr_number(rec, "calib_bytes_per_s");
  if (W > 0)
    rec.attrs.emplace_back(
        "pred_d_ff_star",
        model::moe_overlap_dff_star(F, W, cfg_.n_e, static_cast<double>(dtype_size(cfg_.dtype)),
                                    cfg_.mlp == Mlp::swiglu));
  rec.attrs.emplace_back("overlap_exchanges", pipeline_->overlap_mechanism());
  rec.int_tables.push_back({"drops_per_microbatch", 1, drops.size(), drops});
}

}  // namespace suite::moe

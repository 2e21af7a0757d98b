#include "bench/pipeline/pipeline_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "common/mesh/device_meshes.hpp"

namespace suite::pipeline {

namespace {

constexpr double kTolerance = 1e-10;         // fp64 against the same sums in another order
constexpr double kMaxReferenceValues = 5e7;  // the single-rank model's activations, doubles

// A test hook: this micro-batch's weight gradients are left out of the first stage's sums, so
// the check must fail.
int dropped_microbatch() {
  const char* drop = std::getenv("SUITE_TEST_DROP_MICROBATCH");
  return drop ? std::atoi(drop) : -1;
}

// max |mine - ref| over max |ref| (1 when ref is all zeros).
double relative_error(const Rows& mine, const Rows& ref) {
  if (mine.size() != ref.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(mine[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / (scale > 0 ? scale : 1.0);
}

}  // namespace

void PipelineCase::setup() {
  DeviceMesh& mesh = ctx_.meshes.get(cfg_.mesh);
  pp_comm_ = &mesh.axis(MeshAxis::pp);
  recorded_ = mesh.layout().group(MeshAxis::pp, 0);
  schedule_ = make_schedule(cfg_.spec);
  executor_ = std::make_unique<PipelineExecutor>(schedule_, shape(), cfg_.layers, *pp_comm_,
                                                 dropped_microbatch());
}

bool PipelineCase::recorded() const {
  return std::find(recorded_.begin(), recorded_.end(), ctx_.mpi.rank()) != recorded_.end();
}

void PipelineCase::step(PhaseTimer&) {
  pp_comm_->reset_bytes();
  executor_->run_step();
}

// Every rank runs all L layers on the m micro-batches itself and compares what its stages hold:
// the loss on the last stage, the input gradients on the first, each layer's weight gradients.
CheckOutcome PipelineCase::check() {
  const double values = static_cast<double>(shape().rows) * static_cast<double>(cfg_.ffn) *
                        cfg_.layers * cfg_.spec.microbatches;
  if (values > kMaxReferenceValues)
    return {true, 0, "the single-rank model is above the check's limit", true};
  StageLayers all(shape(), 0, cfg_.layers);
  double loss = 0;
  std::map<int, Rows> grad_input;
  for (int mb = 0; mb < cfg_.spec.microbatches; ++mb) {
    Rows y = all.forward(mb, pipeline_input(shape(), mb));
    for (double v : y)
      loss += 0.5 * v * v;
    grad_input[mb] = all.input_grad(mb, y);
    all.weight_grad(mb);
  }
  std::vector<std::pair<std::string, double>> errors;
  const int rank = pp_comm_->rank(), last = schedule_.stages() - 1;
  for (int c = 0; c < cfg_.spec.chunks; ++c) {
    const int stage = schedule_.stage_of(rank, c);
    if (stage == last)
      errors.emplace_back("loss", std::abs(executor_->loss() - loss) / std::max(loss, 1e-300));
    if (stage == 0)
      for (const auto& [mb, ref] : grad_input) {
        const auto it = executor_->input_grads().find(mb);
        errors.emplace_back(
            "grad_input_mb" + std::to_string(mb),
            it == executor_->input_grads().end() ? INFINITY : relative_error(it->second, ref));
      }
    const StageLayers& mine = executor_->chunk(c);
    for (int l = 0; l < mine.count(); ++l) {
      const int global = mine.first_layer() + l;
      const std::string at = "_layer" + std::to_string(global);
      errors.emplace_back("grad_w1" + at, relative_error(mine.grad_w1()[l], all.grad_w1()[global]));
      errors.emplace_back("grad_w2" + at, relative_error(mine.grad_w2()[l], all.grad_w2()[global]));
    }
  }
  CheckOutcome out;
  std::string worst;
  for (const auto& [name, err] : errors)
    if (!(err <= out.max_abs_err)) out.max_abs_err = err, worst = name;
  if (!(out.max_abs_err <= kTolerance)) {
    out.passed = false;
    out.detail = worst + " differs from one rank running all " + std::to_string(cfg_.layers) +
                 " layers by " + std::to_string(out.max_abs_err) + " of its largest value";
  }
  return out;
}

CaseSpec make_case(BenchContext& ctx, const PipelineConfig& cfg) {
  CaseSpec spec;
  spec.name = cfg.name();
  spec.params = {{"schedule", std::string(schedule_name(cfg.spec.kind))},
                 {"pp", static_cast<std::int64_t>(cfg.spec.ranks)},
                 {"microbatches", static_cast<std::int64_t>(cfg.spec.microbatches)},
                 {"chunks", static_cast<std::int64_t>(cfg.spec.chunks)},
                 {"layers", static_cast<std::int64_t>(cfg.layers)},
                 {"seq", cfg.seq},
                 {"batch", cfg.batch},
                 {"hidden", cfg.hidden},
                 {"ffn_hidden", cfg.ffn},
                 {"replicas", static_cast<std::int64_t>(cfg.replicas)},
                 {"order", mesh_order_name(cfg.mesh)}};
  spec.make = [&ctx, cfg] { return std::make_unique<PipelineCase>(ctx, cfg); };
  spec.console_counters = {"bubble_fraction", "pred_bubble_fraction"};
  return spec;
}

}  // namespace suite::pipeline

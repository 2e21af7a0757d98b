#include "bench/pipeline/pipeline_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "bench/pipeline/block_chunk.hpp"
#include "bench/pipeline/pipeline_check.hpp"
#include "bench/sp_tp/layer_check.hpp"
#include "common/mesh/device_meshes.hpp"

namespace suite::pipeline {

namespace {

constexpr double kMaxReferenceValues = 5e7;  // the single-rank model's activations, doubles

// A test hook: this micro-batch's weight gradients are left out of the first stage's sums, so
// the check must fail.
int dropped_microbatch() {
  const char* drop = std::getenv("SUITE_TEST_DROP_MICROBATCH");
  return drop ? std::atoi(drop) : -1;
}

}  // namespace

void PipelineCase::setup() {
  DeviceMesh& mesh = ctx_.meshes.get(cfg_.mesh);
  pp_comm_ = &mesh.axis(MeshAxis::pp);
  recorded_ = mesh.layout().group(MeshAxis::pp, 0);
  stage_groups_ = {&mesh.axis(MeshAxis::tp), &mesh.axis(MeshAxis::cp)};
  if (cfg_.dp_sums()) {
    Comm& dp = mesh.axis(MeshAxis::dp);
    replica_ = dp.rank();
    dp_sums_ = std::make_unique<DataParallelSums>(cfg_.dp_shard, dp);
  }
  // Each replica runs its own micro-batches: the model's inputs replica m .. replica m + m - 1.
  const int first_input = replica_ * cfg_.spec.microbatches;
  StageFactory make_stage;
  if (cfg_.stage == StageKind::block) {
    schedule_ = fuse_backward(make_schedule(cfg_.spec));
    make_stage = [this, &mesh, block = block_config(cfg_), first_input](int first, int count) {
      return std::make_unique<BlockChunk>(block, ctx_, mesh.axis(MeshAxis::tp), &mesh, first, count,
                                          first_input);
    };
  } else {
    schedule_ = make_schedule(cfg_.spec);
    make_stage = [shape = shape(), first_input](int first, int count) {
      return std::make_unique<StageLayers>(shape, first, count, first_input);
    };
  }
  hops_ = make_hop_transport(cfg_.hops, schedule_, *pp_comm_);
  executor_ = std::make_unique<PipelineExecutor>(schedule_, std::move(make_stage), cfg_.layers,
                                                 pp_comm_->rank(), *hops_, dropped_microbatch(),
                                                 dp_sums_.get());
}

bool PipelineCase::recorded() const {
  return std::find(recorded_.begin(), recorded_.end(), ctx_.mpi.rank()) != recorded_.end();
}

void PipelineCase::step(PhaseTimer&) {
  hops_->reset_bytes();
  executor_->run_step();
}

// Every rank runs all L layers on the m micro-batches itself and compares what its stages hold
// (pipeline_check.cpp).
CheckOutcome PipelineCase::check() {
  const double values = static_cast<double>(cfg_.seq * cfg_.batch) * static_cast<double>(cfg_.ffn) *
                        cfg_.layers * cfg_.spec.microbatches * (dp_sums_ ? cfg_.replicas : 1);
  if (values > kMaxReferenceValues)
    return {true, 0, "the single-rank model is above the check's limit", true};
  const NamedErrors errors =
      cfg_.stage == StageKind::block
          ? block_errors(cfg_, ctx_, schedule_, *executor_, pp_comm_->rank(), dp_sums_.get(),
                         replica_)
          : mlp_errors(cfg_, schedule_, *executor_, pp_comm_->rank(), dp_sums_.get(), replica_);
  CheckOutcome out;
  std::string worst;
  for (const auto& [name, err] : errors)
    if (!(err <= out.max_abs_err)) out.max_abs_err = err, worst = name;
  // The layer's own against the same sums in another order: 1e-10 in fp64, mesh's 1e-4 in fp32.
  const double tolerance = sp_tp::layer_tolerance(cfg_.dtype);
  if (!(out.max_abs_err <= tolerance)) {
    out.passed = false;
    out.detail = worst + " differs from one rank running all " + std::to_string(cfg_.layers) +
                 " layers" + (dp_sums_ ? " on every replica's micro-batches" : "") + " by " +
                 std::to_string(out.max_abs_err) + " of its largest value (tolerance " +
                 std::to_string(tolerance) + ")";
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
                 {"stage", std::string(cfg.stage == StageKind::block ? "block" : "mlp")},
                 {"tp", static_cast<std::int64_t>(cfg.mesh.tp)},
                 {"cp", static_cast<std::int64_t>(cfg.mesh.cp)},
                 {"heads", cfg.heads},
                 {"replicas", static_cast<std::int64_t>(cfg.replicas)},
                 {"dp_shard", std::string(model::dp_shard_name(cfg.dp_shard))},
                 {"order", mesh_order_name(cfg.mesh)},
                 {"hop_transport", std::string(transport_name(cfg.hops))},
                 {"hop_detail", hop_detail(cfg.hops)}};
  spec.make = [&ctx, cfg] { return std::make_unique<PipelineCase>(ctx, cfg); };
  spec.console_counters = {"bubble_fraction", "pred_bubble_fraction"};
  return spec;
}

}  // namespace suite::pipeline

// MoeCase's declaration, shared by its run and check (moe_cases.cpp) and its report against the
// formulas (moe_case_report.cpp). Private to bench/moe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/moe/moe_calibrate.hpp"
#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_layer.hpp"
#include "bench/moe/moe_microbatch.hpp"
#include "bench/moe/moe_ops.hpp"
#include "bench/moe/moe_reference_grad.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::moe {

class MoeCase final : public BenchCase {
 public:
  // check_rows: the case's largest all-to-all-v may exceed the transport's count limit, which
  // only the routing tells: checked in setup.
  MoeCase(BenchContext& ctx, MoeConfig cfg, bool check_rows)
      : ctx_(ctx), cfg_(cfg), check_rows_(check_rows) {}

  void setup() override;
  // fwd_bwd: the forward and the backward timed as wholes too (their phases nest inside).
  void step(PhaseTimer& phases) override;
  // Bytes first (cheap, always), then the host reference of the layer (skipped when too large).
  CheckOutcome check() override;

  LayerGrads layer_grads() const;
  // What the transport counted must be exactly what the routing table implies, in each pass.
  std::string bytes_mismatch() const;
  void report(const Measurement& m, CaseRecord& rec) override;
  std::vector<SavedTensor> tensors() override;

 private:
  // Copies of this rank's tokens per expert: accepted, and routed before drops.
  std::pair<std::vector<double>, std::vector<double>> local_loads() const;
  // Rank loads (max / mean, the worst group) of the block placement and of EPLB's, from the
  // group's loads before timing (each expert's load split evenly over its replicas); the
  // measured one after is rank_load_max_over_mean. Collective over the job.
  void report_placement(CaseRecord& rec);
  // Aux-loss-free balancing (DeepSeek-V3): after each routing step, lower the selection bias of
  // experts above the mean load and raise it for those below, by a fixed rate.
  void balance();
  // --overlap microbatch:M (moe_case_overlap.cpp): the pipeline on the layer's buffers, after
  // one M = 1 step of the layer itself (its time, bytes and, where small, values kept) and
  // one eager step of the pipeline (its pieces' times and the prediction).
  void setup_overlap(NodeComms comms);
  // Exchange bytes and values against M = 1's ("" when equal).
  std::string overlap_mismatch() const;
  void report_overlap(const Measurement& m, CaseRecord& rec) const;

  BenchContext& ctx_;
  MoeConfig cfg_;
  bool check_rows_ = false;
  std::unique_ptr<MoeOps> ops_;
  std::vector<double> group_load_;  // redundant experts: the loads placed by
  std::unique_ptr<MoeLayer> layer_;
  std::int64_t first_token_ = 0;
  std::vector<float> select_bias_;
  std::vector<double> balance_history_;
  Rates rates_;
  std::optional<GradOutcome> grads_;              // the last check's gradient errors (fwd_bwd)
  std::unique_ptr<MicrobatchPipeline> pipeline_;  // --overlap microbatch:M, M > 1
  PipelineProfile profile_;
  double step_m1_s_ = 0;
  StepBytes m1_bytes_, m1_bwd_bytes_;
  std::optional<std::vector<double>> m1_out_;  // M = 1's output, where small enough
  std::optional<LayerGrads> m1_grads_;
};

}  // namespace suite::moe

// One pipeline case: a schedule run over the PP group (setup, the timed step, the check against
// one rank running every layer, and the report of measured against predicted,
// pipeline_report.cpp).
#pragma once

#include <memory>
#include <vector>

#include "bench/pipeline/dp_sums.hpp"
#include "bench/pipeline/pipeline_executor.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "bench/pipeline/stage_layers.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::pipeline {

class PipelineCase final : public BenchCase {
 public:
  PipelineCase(BenchContext& ctx, const PipelineConfig& cfg) : ctx_(ctx), cfg_(cfg) {}

  void setup() override;
  void step(PhaseTimer& phases) override;
  CheckOutcome check() override;
  void report(const Measurement& m, CaseRecord& rec) override;

 private:
  BenchContext& ctx_;
  PipelineConfig cfg_;
  Comm* pp_comm_ = nullptr;          // this rank's PP group: the mesh's pp axis (--order)
  std::vector<Comm*> stage_groups_;  // the TP and CP groups inside this rank's stage
  std::vector<int> recorded_;        // the PP group recorded: world rank 0's, by stage
  Schedule schedule_;
  std::unique_ptr<DataParallelSums> dp_sums_;  // where the replicas sum their gradients
  int replica_ = 0;                            // this rank's index on the DP axis
  std::unique_ptr<HopTransport> hops_;         // what carries the hops over the PP group
  std::unique_ptr<PipelineExecutor> executor_;
  LayerShape shape() const { return {cfg_.seq * cfg_.batch, cfg_.hidden, cfg_.ffn}; }
  // Whether this rank is in the PP group recorded.
  bool recorded() const;
  // The DP sums' bytes and time beside dp_shard_cost's (world rank 0's).
  void report_dp_sums(CaseRecord& rec) const;
};

CaseSpec make_case(BenchContext& ctx, const PipelineConfig& cfg);

}  // namespace suite::pipeline

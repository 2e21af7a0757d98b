// The pipeline part of a plan (METHODS.md section 7): a stage's step from the schedule
// generator's critical path (common/formulas/pipeline_graph.hpp) rather than a closed form, so
// interleaving, zero-bubble schedules, uneven first and last stages and the hops between ranks
// are timed as the schedule runs them; and the micro-batch chunks each rank holds at its peak,
// which sizes a stage's activations.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "common/formulas/pipeline_graph.hpp"

namespace suite::model {

// One micro-batch through one layer: the forward, the input gradient (B) and the weight
// gradients (W); a fused backward is B + W.
struct LayerTimes {
  double forward = 0, input_grad = 0, weight_grad = 0;
};

// What a pipeline step costs at one schedule.
struct PipelineTime {
  double step = 0;      // the critical path: every op, the bubble and the hops on it
  double busy = 0;      // the busiest rank's ops
  int peak_chunks = 0;  // the most micro-batch chunks a rank holds at once (any rank)
};

// The schedules a plan tries at p stages and m micro-batches: each kind of `kinds` whose
// generator accepts (p, m, v); interleaved at `chunks` or, with chunks 0, at every v from 2 up
// while p v stages have a layer each (at most 8).
std::vector<pipeline::ScheduleSpec> pipeline_candidates(
    const std::vector<pipeline::ScheduleKind>& kinds, int chunks, int p, int m, int layers);

// Layers a chunk holds: the model's layers over p v chunks, rounded up (the slowest stage
// paces the pipeline).
int layers_per_chunk(int layers, const pipeline::ScheduleSpec& spec);

// Times schedules, keeping each one's ops and graph (the plan times thousands of meshes on a
// few schedules).
class PipelineTimer {
 public:
  // One chunk op is layers_per_chunk(layers, spec) layers' times; the first stage adds `first`
  // (the embedding) and the last `last` (the output layer and the loss) to its ops; `hop` is
  // one activation's or gradient's transfer between ranks.
  PipelineTime time(const pipeline::ScheduleSpec& spec, int layers, const LayerTimes& layer,
                    const pipeline::OpCosts& first, const pipeline::OpCosts& last, double hop);

 private:
  struct Built {
    pipeline::Schedule schedule;
    pipeline::ScheduleGraph graph;
    int peak = 0;
  };
  const Built& built(const pipeline::ScheduleSpec& spec);
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<Built>> cache_;
};

}  // namespace suite::model

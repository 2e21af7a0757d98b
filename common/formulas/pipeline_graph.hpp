// A pipeline schedule's dependency graph and its critical path (METHODS.md section 7): each op
// starts after its rank's previous op and after the op that feeds it, plus one hop when that op
// ran on another rank. The step time and bubble the benchmark predicts, model prints and the
// planner ranks by.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/formulas/pipeline_schedule.hpp"

namespace suite::pipeline {

// An op of the schedule: its rank and its position in the rank's order.
struct OpRef {
  int rank;
  int index;
  bool operator==(const OpRef&) const = default;
};

// What an op waits for: the rank's previous op (no hop) and its data (the activation of the
// stage before, the gradient of the stage after, its own B for a W), with a hop when the
// producer is on another rank.
struct Dependency {
  OpRef from;
  bool hop;
};

struct ScheduleGraph {
  std::vector<std::vector<std::vector<Dependency>>> deps;  // [rank][index]
  // Every op in an order that respects the dependencies; empty when they form a cycle (a
  // schedule that would hang).
  std::vector<OpRef> topological;
};

ScheduleGraph build_graph(const Schedule& schedule);

// Seconds (or any unit) of one op on a rank.
using OpDuration = std::function<double(int rank, const Op& op)>;

// The same F, B, W on every rank and chunk; BW is B + W.
struct OpCosts {
  double forward = 1, input_grad = 1, weight_grad = 1;
  double of(OpKind kind) const;
};
OpDuration uniform(const OpCosts& costs);

struct Timeline {
  std::vector<std::vector<double>> start, end;  // [rank][index]
  double step = 0;                              // the last op's end
  std::vector<double> busy;                     // per rank, the sum of its ops
  // Mean over ranks of step - busy: the time ranks spend idle.
  double bubble() const;
};

// The critical path: every op as early as its dependencies allow. UsageError when the graph has
// a cycle.
Timeline critical_path(const Schedule& schedule, const ScheduleGraph& graph,
                       const OpDuration& duration, double hop);

// METHODS.md 7's closed-form bubble per rank (no hop, equal stages) from one chunk op's F, B, W
// (a fused backward: B its whole time, W 0): gpipe and 1f1b (p - 1)(F + B + W); interleaved the
// same per chunk op, i.e. (p - 1)(F + B + W)/v of a whole stage's; zb-h1 (p - 1)(F + B - W); zb-v
// (p - 1) F, the V's fill (its graph's bubble at F = B = W).
double closed_form_bubble(ScheduleKind kind, int ranks, const OpCosts& chunk);

}  // namespace suite::pipeline

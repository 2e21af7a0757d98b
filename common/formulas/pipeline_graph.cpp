#include "common/formulas/pipeline_graph.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "common/harness/errors.hpp"

namespace suite::pipeline {

namespace {

// Where each (kind, stage, micro-batch) op sits.
using OpKey = std::tuple<OpKind, int, int>;

std::map<OpKey, OpRef> locate(const Schedule& s) {
  std::map<OpKey, OpRef> where;
  for (int r = 0; r < s.spec.ranks; ++r)
    for (int i = 0; i < static_cast<int>(s.ranks[r].size()); ++i) {
      const Op& op = s.ranks[r][i];
      where[{op.kind, s.stage_of(r, op.chunk), op.microbatch}] = {r, i};
    }
  return where;
}

// The op whose output this op consumes, if the schedule has it.
std::vector<OpKey> data_sources(const Schedule& s, int rank, const Op& op) {
  const int stage = s.stage_of(rank, op.chunk), last = s.stages() - 1, mb = op.microbatch;
  const OpKind grad = s.split_backward() ? OpKind::B : OpKind::BW;
  switch (op.kind) {
    case OpKind::F:
      if (stage == 0) return {};
      return {{OpKind::F, stage - 1, mb}};
    case OpKind::B:
    case OpKind::BW:
      if (stage == last) return {{OpKind::F, stage, mb}};
      return {{grad, stage + 1, mb}, {OpKind::F, stage, mb}};
    case OpKind::W:
      return {{OpKind::B, stage, mb}};
  }
  return {};
}

}  // namespace

ScheduleGraph build_graph(const Schedule& s) {
  const int p = s.spec.ranks;
  const auto where = locate(s);
  ScheduleGraph g;
  g.deps.resize(p);
  std::vector<std::vector<int>> waiting(p);  // unmet dependencies per op
  std::map<std::pair<int, int>, std::vector<OpRef>> users;
  for (int r = 0; r < p; ++r) {
    const int n = static_cast<int>(s.ranks[r].size());
    g.deps[r].resize(n);
    waiting[r].assign(n, 0);
    for (int i = 0; i < n; ++i) {
      if (i > 0) g.deps[r][i].push_back({{r, i - 1}, false});
      for (const OpKey& key : data_sources(s, r, s.ranks[r][i])) {
        const auto it = where.find(key);
        if (it == where.end()) throw UsageError("pipeline schedule lacks an op it depends on");
        g.deps[r][i].push_back({it->second, it->second.rank != r});
      }
      for (const Dependency& d : g.deps[r][i])
        users[{d.from.rank, d.from.index}].push_back({r, i});
      waiting[r][i] = static_cast<int>(g.deps[r][i].size());
    }
  }
  // Kahn's order; ops left unvisited sit on a cycle.
  std::vector<OpRef> ready;
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < static_cast<int>(waiting[r].size()); ++i)
      if (waiting[r][i] == 0) ready.push_back({r, i});
  while (!ready.empty()) {
    const OpRef op = ready.back();
    ready.pop_back();
    g.topological.push_back(op);
    for (const OpRef& u : users[{op.rank, op.index}])
      if (--waiting[u.rank][u.index] == 0) ready.push_back(u);
  }
  std::size_t total = 0;
  for (const auto& ops : s.ranks)
    total += ops.size();
  if (g.topological.size() != total) g.topological.clear();
  return g;
}

double OpCosts::of(OpKind kind) const {
  switch (kind) {
    case OpKind::F:
      return forward;
    case OpKind::B:
      return input_grad;
    case OpKind::W:
      return weight_grad;
    case OpKind::BW:
      return input_grad + weight_grad;
  }
  return 0;
}

OpDuration uniform(const OpCosts& costs) {
  return [costs](int, const Op& op) { return costs.of(op.kind); };
}

double Timeline::bubble() const {
  if (busy.empty()) return 0;
  double idle = 0;
  for (double b : busy)
    idle += step - b;
  return idle / static_cast<double>(busy.size());
}

Timeline critical_path(const Schedule& s, const ScheduleGraph& g, const OpDuration& duration,
                       double hop) {
  if (g.topological.empty()) throw UsageError("pipeline schedule has a dependency cycle");
  Timeline t;
  const int p = s.spec.ranks;
  t.start.resize(p), t.end.resize(p), t.busy.assign(p, 0);
  for (int r = 0; r < p; ++r)
    t.start[r].assign(s.ranks[r].size(), 0), t.end[r] = t.start[r];
  for (const OpRef& op : g.topological) {
    double begin = 0;
    for (const Dependency& d : g.deps[op.rank][op.index])
      begin = std::max(begin, t.end[d.from.rank][d.from.index] + (d.hop ? hop : 0));
    const double length = duration(op.rank, s.ranks[op.rank][op.index]);
    t.start[op.rank][op.index] = begin;
    t.end[op.rank][op.index] = begin + length;
    t.busy[op.rank] += length;
    t.step = std::max(t.step, begin + length);
  }
  return t;
}

double closed_form_bubble(ScheduleKind kind, int ranks, const OpCosts& c) {
  const double fill = ranks - 1;
  switch (kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::interleaved:
      return fill * (c.forward + c.input_grad + c.weight_grad);
    case ScheduleKind::zb_h1:
      return fill * (c.forward + c.input_grad - c.weight_grad);
    case ScheduleKind::zb_v:
      return fill * c.forward;
  }
  return 0;
}

}  // namespace suite::pipeline

#include "common/formulas/plan_pipeline.hpp"

#include <algorithm>

namespace suite::model {

namespace pp = suite::pipeline;

std::vector<pp::ScheduleSpec> pipeline_candidates(const std::vector<pp::ScheduleKind>& kinds,
                                                  int chunks, int p, int m, int layers) {
  constexpr int kMaxSearchedChunks = 8;
  std::vector<pp::ScheduleSpec> out;
  for (pp::ScheduleKind kind : kinds) {
    std::vector<int> vs = {pp::default_chunks(kind)};
    if (kind == pp::ScheduleKind::interleaved) {
      vs.clear();
      if (chunks > 0)
        vs.push_back(chunks);
      else
        for (int v = 2; v <= kMaxSearchedChunks && p * v <= layers; ++v)
          vs.push_back(v);
    }
    for (int v : vs) {
      const pp::ScheduleSpec spec{kind, p, m, v};
      if (p * v <= layers && pp::check_schedule(spec).empty()) out.push_back(spec);
    }
  }
  return out;
}

int layers_per_chunk(int layers, const pp::ScheduleSpec& spec) {
  const int chunks = spec.ranks * spec.chunks;
  return (layers + chunks - 1) / chunks;
}

const PipelineTimer::Built& PipelineTimer::built(const pp::ScheduleSpec& spec) {
  auto& slot = cache_[{static_cast<int>(spec.kind), spec.ranks, spec.microbatches, spec.chunks}];
  if (!slot) {
    pp::Schedule s = pp::make_schedule(spec);
    pp::ScheduleGraph g = pp::build_graph(s);
    const std::vector<int> peaks = pp::peak_in_flight(s);
    const int peak = peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
    slot = std::make_unique<Built>(Built{std::move(s), std::move(g), peak});
  }
  return *slot;
}

PipelineTime PipelineTimer::time(const pp::ScheduleSpec& spec, int layers, const LayerTimes& layer,
                                 const pp::OpCosts& first, const pp::OpCosts& last, double hop) {
  // Past the warm-up every schedule repeats with a period of p micro-batches (each adds the
  // same ops to every rank), so a long step is the path of 2p + (m mod p) micro-batches and p
  // more, extended linearly: the graph stays a few p^2 ops however many micro-batches a step has.
  const int p = spec.ranks, m = spec.microbatches, short_m = 2 * p + m % p;
  if (p > 1 && m > short_m + p) {
    pp::ScheduleSpec a = spec, b = spec;
    a.microbatches = short_m;
    b.microbatches = short_m + p;
    const PipelineTime ta = time(a, layers, layer, first, last, hop),
                       tb = time(b, layers, layer, first, last, hop);
    const double periods = static_cast<double>(m - short_m) / p;
    return {ta.step + periods * (tb.step - ta.step), ta.busy + periods * (tb.busy - ta.busy),
            std::max(ta.peak_chunks, tb.peak_chunks)};
  }
  const Built& b = built(spec);
  const double n = layers_per_chunk(layers, spec);
  const pp::OpCosts chunk{n * layer.forward, n * layer.input_grad, n * layer.weight_grad};
  const int last_stage = b.schedule.stages() - 1;
  const pp::Schedule& s = b.schedule;
  const pp::OpDuration duration = [&](int rank, const pp::Op& op) {
    const int stage = s.stage_of(rank, op.chunk);
    double t = chunk.of(op.kind);
    if (stage == 0) t += first.of(op.kind);
    if (stage == last_stage) t += last.of(op.kind);
    return t;
  };
  const pp::Timeline t = pp::critical_path(s, b.graph, duration, hop);
  PipelineTime out;
  out.step = t.step;
  out.busy = t.busy.empty() ? 0 : *std::max_element(t.busy.begin(), t.busy.end());
  out.peak_chunks = b.peak;
  return out;
}

}  // namespace suite::model

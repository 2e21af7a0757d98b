#include "bench/model/pipeline_section.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "common/formulas/pipeline_graph.hpp"
#include "common/harness/errors.hpp"

namespace suite::model_cli {

void print_pipeline(const pipeline::ScheduleFlags& flags) {
  namespace pp = suite::pipeline;
  const int p = pp::one_pp(flags);
  if (p < 1)
    throw UsageError("--pp " + std::to_string(p) + ": --section pipeline needs the stages");
  const std::vector<pp::ScheduleSpec> specs = pp::schedule_specs(flags, p);
  std::printf(
      "Pipeline (METHODS.md 7): p = %d; F = B = W = 1 unit for a rank's L/p layers (1/v\n"
      "per chunk op), a whole backward B + W, no hop. Step and bubble: the critical path\n"
      "of the schedule's graph; closed: METHODS.md 7's bubble; peak: micro-batch chunks\n"
      "held per rank (rank 0 first).\n",
      p);
  std::printf("%-12s %3s %4s %8s %8s %8s %8s %6s  %s\n", "schedule", "v", "m", "step", "bubble",
              "fraction", "closed", "hops", "peak");
  for (const pp::ScheduleSpec& spec : specs) {
    const double unit = 1.0 / spec.chunks;
    const pp::OpCosts chunk{unit, unit, unit};
    const pp::Schedule s = pp::make_schedule(spec);
    const pp::Timeline t = pp::critical_path(s, pp::build_graph(s), pp::uniform(chunk), 0);
    int hops = 0;  // each micro-batch crosses every boundary between ranks, both ways
    for (int stage = 1; stage < s.stages(); ++stage)
      if (s.rank_of(stage) != s.rank_of(stage - 1)) hops += 2 * spec.microbatches;
    std::string peak;
    for (int n : pp::peak_in_flight(s))
      peak += (peak.empty() ? "" : " ") + std::to_string(n);
    std::printf("%-12s %3d %4d %8.1f %8.1f %8.3f %8.1f %6d  %s\n", pp::schedule_name(spec.kind),
                spec.chunks, spec.microbatches, t.step, t.bubble(), t.bubble() / t.step,
                pp::closed_form_bubble(spec.kind, spec.ranks, chunk), hops, peak.c_str());
  }
}

}  // namespace suite::model_cli

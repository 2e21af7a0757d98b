#include "bench/model/plan_explain.hpp"

#include <cstdio>

namespace suite::model_cli {
namespace {

struct Part {
  const char* name;
  double model::PlanEntry::*seconds;
  const char* what;
};

// The parts that sum to a mesh's step (PlanEntry::step_s).
constexpr Part kParts[] = {
    {"compute", &model::PlanEntry::compute_s, "GEMMs and attention, the output layer's"},
    {"tp", &model::PlanEntry::tp_s, "TP's collectives, exposed"},
    {"cp", &model::PlanEntry::cp_s, "CP's exchange, the part attention does not hide"},
    {"ep", &model::PlanEntry::ep_s, "EP's all-to-alls"},
    {"dp", &model::PlanEntry::dp_s, "the gradient sums; full sharding's gathers"},
    {"pp", &model::PlanEntry::pp_s, "the bubble and the hops on the critical path"},
    {"recompute", &model::PlanEntry::recompute_s, "full recomputation's second forwards"},
};

const Part& part_named(const std::string& name) {
  for (const Part& p : kParts)
    if (name == p.name) return p;
  return kParts[0];
}

void print_line(const model::PlanEntry& e, std::size_t rank, const std::string& deciding) {
  std::printf("explanation: section=plan mesh=%s rank=%zu step_s=%.9g", e.name().c_str(), rank,
              e.step_s);
  for (const Part& p : kParts)
    std::printf(" %s_s=%.9g", p.name, e.*p.seconds);
  std::printf(" memory_bytes=%.9g fits=%d deciding=%s\n", e.memory_bytes, e.fits ? 1 : 0,
              deciding.c_str());
}

}  // namespace

std::string deciding_part(const model::PlanEntry& mesh, const model::PlanEntry& best) {
  std::string part = "none";
  double most = 0;
  for (const Part& p : kParts) {
    const double loss = mesh.*p.seconds - best.*p.seconds;
    if (loss > most) most = loss, part = p.name;
  }
  return part;
}

void print_explanation(const std::vector<model::PlanEntry>& plan, std::size_t compared) {
  const model::PlanEntry &e = plan[compared], &best = plan.front();
  std::printf("  why: %s (rank %zu) beside the best, %s, in seconds a step\n", e.name().c_str(),
              compared + 1, best.name().c_str());
  std::printf("  %-10s %12s %12s %12s\n", "part", "this", "best", "this-best");
  for (const Part& p : kParts)
    std::printf("  %-10s %12.6g %12.6g %+12.6g  %s\n", p.name, e.*p.seconds, best.*p.seconds,
                e.*p.seconds - best.*p.seconds, p.what);
  std::printf("  %-10s %12.6g %12.6g %+12.6g  the sum of the parts\n", "step", e.step_s,
              best.step_s, e.step_s - best.step_s);
  std::printf("  %-10s %12.3f %12.3f %+12.3f  per GPU (%s)\n", "memory_GB", e.memory_bytes / 1e9,
              best.memory_bytes / 1e9, (e.memory_bytes - best.memory_bytes) / 1e9,
              e.fits ? "fits" : "does not fit");
  const std::string deciding = deciding_part(e, best);
  if (deciding == "none")
    std::printf("  deciding: none\n");
  else
    std::printf("  deciding: %s, %+.6g s of the step's %+.6g s\n", deciding.c_str(),
                e.*part_named(deciding).seconds - best.*part_named(deciding).seconds,
                e.step_s - best.step_s);
  if (!e.fits) std::printf("  and it does not fit: %.1f GB a GPU\n", e.memory_bytes / 1e9);
  print_line(e, compared + 1, deciding);
  print_line(best, 1, "none");
}

}  // namespace suite::model_cli

// model's flags as sections, declared once: the parameters every section reads (sizes, rates,
// degrees), varlen's documents and layouts, the mesh's order and links, the plan's job.
#pragma once

#include <string>

#include "bench/model/mesh_section.hpp"
#include "bench/model/params.hpp"
#include "bench/model/plan_section.hpp"
#include "bench/model/varlen.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "common/harness/options.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace suite::model_cli {

struct ModelFlags {
  Params p;
  std::string section = "all";
  VarlenOptions varlen;  // its seed defaults to the benchmarks' --seed (add_model_flags)
  std::string cp_sweep, layouts = "contiguous,zigzag,striped,doc_zigzag,balanced";
  std::string tokens_per_rank;
  MeshOptions mesh;
  PlanOptions mesh_plan;
  pipeline::ScheduleFlags schedule;  // --section pipeline; plan's --schedule and --chunks
  double flops_bwd = 0;
  // Given on the command line? (--flops-bwd's default is --flops; --experts and --ep mean
  // "dense" and "C D" in the mesh and plan sections unless given.)
  CLI::Option *flops_bwd_opt = nullptr, *experts_opt = nullptr, *ep_opt = nullptr;
  // --schedule given: the plan tries those schedules only (otherwise every one but gpipe).
  CLI::Option* schedule_opt = nullptr;
};

void add_model_flags(CLI::App& app, ModelFlags& f);

}  // namespace suite::model_cli

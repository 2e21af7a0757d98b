// model --section pipeline: each --schedule's step and bubble at --pp, --microbatches and
// --chunks from the same generator and graph the pipeline benchmark runs
// (common/formulas/pipeline_schedule.hpp, pipeline_graph.hpp), beside METHODS.md 7's closed form.
#pragma once

#include "bench/pipeline/pipeline_flags.hpp"

namespace suite::model_cli {

// Refuses --pp 0 (no job to take it from) and what the pipeline benchmark refuses (UsageError).
void print_pipeline(const pipeline::ScheduleFlags& flags);

}  // namespace suite::model_cli

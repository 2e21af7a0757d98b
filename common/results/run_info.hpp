// The file attributes of a run: who ran what, where, with which libraries.
#pragma once

#include "common/harness/context.hpp"
#include "common/results/results.hpp"

namespace suite {

// Collective (gathers device names); the result is meaningful on rank 0.
RunInfo collect_run_info(const BenchContext& ctx, const std::string& command_line);

// The file attributes of a single-process benchmark (kernel_bench: no MPI, no communicator):
// the same provenance, one "rank", transport and link `none`.
RunInfo single_process_run_info(const std::string& bench, const std::string& command_line,
                                const std::string& backend, const std::string& device_name);

// "2026-11-30T10:30:00Z"
std::string utc_now_iso();

// results/<bench>_<UTC stamp>.h5, where a run without --out writes.
std::string default_results_path(const std::string& bench);

}  // namespace suite

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

// The NVIDIA driver's release in the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA
// UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..." gives "550.54.15"; the open module's
// line too); "unknown" where it names none. Recorded as gpu_driver.
std::string nvidia_driver_from(const std::string& proc_text);

// "2026-11-30T10:30:00Z"
std::string utc_now_iso();

// results/<bench>_<UTC stamp>.h5, where a run without --out writes.
std::string default_results_path(const std::string& bench);

}  // namespace suite

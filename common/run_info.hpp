// The file attributes of a run: who ran what, where, with which libraries.
#pragma once

#include "common/context.hpp"
#include "common/results.hpp"

namespace suite {

// Collective (gathers device names); the result is meaningful on rank 0.
RunInfo collect_run_info(const BenchContext& ctx, const std::string& command_line);

// "2026-11-30T10:30:00Z"
std::string utc_now_iso();

}  // namespace suite

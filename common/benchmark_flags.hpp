// Google Benchmark's pass-through flags, read and checked before its own parser sees them:
// shared by the MPI benchmarks (bench_main) and kernel_bench.
#pragma once

#include <optional>
#include <string>

namespace suite {

// The value of `--name=value` in a, if a is that flag.
std::optional<std::string> flag_value(const std::string& a, const std::string& name);

// Throws UsageError, naming the flag, for a value Google Benchmark would reject by printing
// its usage on every rank and exiting without MPI_Finalize, or accept and then fail on (a
// negative repetition count, a filter that is not a regular expression).
void check_benchmark_values(const std::string& a);

}  // namespace suite

// Google Benchmark's pass-through flags, read and checked before its own parser sees them:
// shared by the MPI benchmarks (bench_main) and kernel_bench.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace suite {

// The value of `--name=value` in a, if a is that flag.
std::optional<std::string> flag_value(const std::string& a, const std::string& name);

// The value of the last `--name=value` among flags, or fallback.
std::string last_flag_value(const std::vector<std::string>& flags, const std::string& name,
                            const std::string& fallback);

// Whether the last `--name[=value]` among flags sets a boolean flag, read as Google Benchmark
// reads one (a bare `--name` is true; 0, false, no, off, f, n and their capitals are false).
bool flag_is_true(const std::vector<std::string>& flags, const std::string& name);

// Throws UsageError, naming the flag, for a value Google Benchmark would reject by printing
// its usage on every rank and exiting without MPI_Finalize, or accept and then fail on (a
// negative repetition count, a filter that is not a regular expression).
void check_benchmark_values(const std::string& a);

}  // namespace suite

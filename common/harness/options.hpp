// The flags every benchmark shares, and the split between our flags and Google Benchmark's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

// Declared only: CLI11 costs about 6 s of compile time in each file that includes it, and
// this header reaches most of the suite through context.hpp. The files that add or parse
// flags include <CLI/CLI.hpp> themselves.
namespace CLI {
class App;
}

namespace suite {

struct CommonOptions {
  std::string backend = "auto";    // cpu | cuda | auto
  std::string transport = "auto";  // mpi | nccl | auto
  std::string dtype = "auto";      // fp32 | fp64 | bf16 | auto
  int iters = 20;
  int warmup = 5;
  std::string out;  // empty: results/<bench>_<UTC time>.h5
  std::uint64_t seed = 1234;
  int check = 1;
  double timeout_s = 600;
  std::string link = "unspecified";
  bool save_tensors = false;
  // --order, where the benchmark's groups follow it (BenchDefinition::axis_order): one order.
  std::string order = "tp,cp,ep,dp";
};

void add_common_options(CLI::App& app, CommonOptions& o);

// Google Benchmark's flags (--benchmark_*) found in argv, and everything else.
struct SplitArgs {
  std::vector<std::string> ours;       // argv[0] first
  std::vector<std::string> benchmark;  // argv[0] first, then the --benchmark_* flags
};

// Throws UsageError for Google Benchmark flags that would let ranks run different loops.
SplitArgs split_benchmark_flags(int argc, char** argv);

// What --help adds after the flags: sweep syntax and Google Benchmark pass-through.
std::string common_help_footer();

}  // namespace suite

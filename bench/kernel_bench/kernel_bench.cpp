// kernel_bench: single-process rates of the suite's compute kernels.
//
// The attention rate measured here is the F of the ring-attention overlap condition
// c >= F / W (METHODS.md section 2): a ring round hides its K/V transfer only if the block
// of c tokens takes at least as long to attend as its 4ch bytes take to travel. Feed this F,
// not a datasheet peak, into that bound; the peak is printed beside it only to show how far
// the kernel is from the hardware (and to flag impossible, i.e. buggy, measurements).
//
// Extra flags (removed before Google Benchmark sees argv):
//   --peak-gflops=X     the CPU's fp32 peak in GFLOP/s (fp64 cases use X/2); default unknown.
//   --out=FILE.h5       the results file (default results/kernel_bench_<UTC stamp>.h5).
//   --attn-kernel=LIST  CUDA attention kernels to time: suite, cudnn, auto, all (default all).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/kernel_bench/kernel_bench_common.hpp"
#include "bench/kernel_bench/kernel_results.hpp"
#include "common/device/cpu_info.hpp"
#include "common/harness/benchmark_flags.hpp"
#include "common/results/results.hpp"
#include "common/results/run_info.hpp"
#include "kernels/core/blas_cpu_rerun.hpp"

namespace {

// Removes every `prefix<value>` argument from argv; returns the last value (empty optional
// when absent).
std::optional<std::string> take_flag(int& argc, char** argv, const char* prefix) {
  std::optional<std::string> value;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      value = std::string(argv[i] + std::strlen(prefix));
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return value;
}

}  // namespace

// Our part of --help; Google Benchmark then prints its own flags and exits.
void print_help() {
  std::cout
      << "kernel_bench: achieved FLOP/s of the suite's attention and GEMM kernels, one process.\n"
         "CPU cases always; CUDA cases (cuBLASLt GEMM; attention: the suite's flash kernel and\n"
         "cuDNN's SDPA) when a GPU is visible.\n"
         "Counters: FLOP/s, FLOP_per_iter (causal attention counts visible pairs exactly),\n"
         "and, where the peak is known (device table for GPUs; --peak-gflops for the CPU),\n"
         "peak_FLOP/s, frac_of_peak, and impossible=1 when a rate exceeds the peak.\n"
         "The attention FLOP/s is the F of ring attention's c >= F/W (see `model --flops`).\n\n"
         "  --peak-gflops=X     the CPU's fp32 peak in GFLOP/s (fp64 cases use X/2)\n"
         "  --out=FILE.h5       results file, one /kernel_bench/<case> group per run with its\n"
         "                      iteration times, rate, peak and kernel (default\n"
         "                      results/kernel_bench_<UTC stamp>.h5)\n"
         "  --attn-kernel=LIST  CUDA attention kernels to time, comma-separated: suite (the\n"
         "                      suite's flash kernel), cudnn (cuDNN SDPA), auto (what the\n"
         "                      benchmarks pick), all (every kernel this build has; default)\n"
         "Attention cases are named attention_cuda/<dtype>/<kernel>/...; each case's label says\n"
         "attn_kernel and attn_library (the library version actually loaded). bf16 adds a sweep\n"
         "of s = 1K..32K at d = 64 (a = 32) and d = 128 (a = 16), causal. Backward cases\n"
         "(attention_bwd_cpu/..., attention_bwd_cuda/<dtype>/<kernel>/...: delta + backward from\n"
         "the forward's statistics) count 10 d a FLOPs per visible pair, 2.5x the forward's.\n\n"
         "Google Benchmark flags:\n";
}

// --peak-gflops's value in FLOP/s, or nullopt unless it is a finite positive number.
std::optional<double> parse_peak(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v > 0) return v * 1e9;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

int main(int argc, char** argv) {
  // First: may start the process again on the BLAS kernels this CPU can run.
  suite::kernels::cpu::rerun_on_cpu_blas_core(argv, suite::cpu_flags());
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::string command_line = argv[0];
  for (const auto& a : args)
    command_line += " " + a;
  for (const auto& a : args) {
    if (a == "--help") print_help();
    try {
      suite::check_benchmark_values(a);
    } catch (const std::exception& e) {
      std::cerr << "error: kernel_bench: " << e.what() << "\n";
      return 2;
    }
  }
  const bool list_only = suite::flag_is_true(args, "--benchmark_list_tests");
  // Taken out of Google Benchmark's hands below: it would hand the reporter the aggregates
  // alone, and the results file keeps every run.
  const bool aggregates_only = suite::flag_is_true(args, "--benchmark_report_aggregates_only") ||
                               suite::flag_is_true(args, "--benchmark_display_aggregates_only");
  const std::string format = suite::last_flag_value(args, "--benchmark_format", "console");
  double cpu_peak = 0;
  if (auto v = take_flag(argc, argv, "--peak-gflops=")) {
    const auto peak = parse_peak(*v);
    if (!peak) {
      std::cerr << "error: kernel_bench: --peak-gflops=" << *v << ": needs a positive number\n";
      return 2;
    }
    cpu_peak = *peak;
  }
  const std::string out =
      take_flag(argc, argv, "--out=").value_or(suite::default_results_path("kernel_bench"));
  for (const char* flag :
       {"--benchmark_report_aggregates_only", "--benchmark_display_aggregates_only"})
    take_flag(argc, argv, flag);
  std::vector<std::string> attn_kernels;
  try {
    attn_kernels = suite::bench::parse_attn_kernel_list(
        take_flag(argc, argv, "--attn-kernel=").value_or("all"));
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: kernel_bench: " << e.what() << "\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  suite::bench::register_cpu_cases(cpu_peak);
  std::string gpu;
#if defined(SUITE_HAVE_CUDA)
  try {
    gpu = suite::bench::register_cuda_cases(attn_kernels);
    if (gpu.empty())
      benchmark::AddCustomContext("cuda_device", "none visible (GPU cases not registered)");
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: kernel_bench: " << e.what() << "\n";
    return 2;
  }
#else
  for (const auto& k : attn_kernels) {
    if (k == "cudnn") {
      std::cerr << "error: kernel_bench: --attn-kernel=cudnn: this build has no CUDA\n";
      return 2;
    }
  }
#endif
  if (list_only) {  // names only: nothing runs, nothing to record
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  if (auto note = suite::kernels::cpu::blas_core_note()) std::cerr << "note: " << *note << "\n";
  std::unique_ptr<suite::ResultsWriter> writer;
  try {
    writer = std::make_unique<suite::ResultsWriter>(out);
    writer->write_run_info(
        suite::single_process_run_info("kernel_bench", command_line, gpu.empty() ? "cpu" : "cuda",
                                       gpu.empty() ? suite::cpu_device_name() : gpu));
  } catch (const std::exception& e) {
    std::cerr << "error: kernel_bench: " << e.what() << "\n";
    return 2;
  }
  suite::bench::ResultsFileReporter reporter(*writer, aggregates_only);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (reporter.cases_written() == 0) {
    writer->discard();
    std::cerr << "error: kernel_bench: no case ran (does --benchmark_filter match any?)\n";
    return 2;
  }
  try {
    writer->finish();
  } catch (const std::exception& e) {
    std::cerr << "error: kernel_bench: finishing " << out << ": " << e.what() << "\n";
    return 3;
  }
  // stdout is Google Benchmark's report alone when it is JSON or CSV.
  (format == "console" ? std::cout : std::cerr)
      << "results: " << out << " (" << reporter.cases_written() << " cases)\n";
  return 0;
}

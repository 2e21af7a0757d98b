// kernel_bench: single-process rates of the suite's compute kernels.
//
// The attention rate measured here is the F of the ring-attention overlap condition
// c >= F / W (METHODS.md section 2): a ring round hides its K/V transfer only if the block
// of c tokens takes at least as long to attend as its 4ch bytes take to travel. Feed this F,
// not a datasheet peak, into that bound; the peak is printed beside it only to show how far
// the kernel is from the hardware (and to flag impossible, i.e. buggy, measurements).
//
// Extra flag (removed before Google Benchmark sees argv):
//   --peak-gflops=X  the CPU's fp32 peak in GFLOP/s (fp64 cases use X/2); default unknown.
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "bench/kernels/kernel_bench_common.hpp"

namespace {

// Extracts --peak-gflops=X from argv; returns X * 1e9 (0 when absent).
double take_peak_flag(int& argc, char** argv) {
  const char* prefix = "--peak-gflops=";
  double peak = 0;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      peak = std::stod(argv[i] + std::strlen(prefix)) * 1e9;
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return peak;
}

}  // namespace

// Our part of --help; Google Benchmark then prints its own flags and exits.
void print_help() {
  std::cout
      << "kernel_bench: achieved FLOP/s of the suite's attention and GEMM kernels, one process.\n"
         "CPU cases always; CUDA cases (cuBLAS GEMM, flash attention) when a GPU is visible.\n"
         "Counters: FLOP/s, FLOP_per_iter (causal attention counts visible pairs exactly),\n"
         "peak_FLOP/s (device table for GPUs; --peak-gflops for the CPU; 0 = unknown),\n"
         "frac_of_peak, and impossible=1 when a rate exceeds the peak.\n"
         "The attention FLOP/s is the F of ring attention's c >= F/W (see `model --flops`).\n\n"
         "  --peak-gflops=X   the CPU's fp32 peak in GFLOP/s (fp64 cases use X/2)\n\n"
         "Google Benchmark flags:\n";
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0) print_help();
  double cpu_peak = 0;
  try {
    cpu_peak = take_peak_flag(argc, argv);
  } catch (const std::exception&) {
    std::cerr << "kernel_bench: --peak-gflops needs a number\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  suite::bench::register_cpu_cases(cpu_peak);
#if defined(SUITE_HAVE_CUDA)
  if (!suite::bench::register_cuda_cases()) {
    benchmark::AddCustomContext("cuda_device", "none visible (GPU cases not registered)");
  }
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

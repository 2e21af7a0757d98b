// kernel_bench's results file (the suite's HDF5 contract, docs/RESULTS_SCHEMA.md): one case
// group per Google Benchmark run, with its per-iteration times, its rate beside the device's
// peak and the kernel and library that ran, so compare, history and the plots track the
// kernels' F from run to run as they track the methods.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/results.hpp"

namespace suite::bench {

// Registers fn under name (manual time); the iteration times it reports through
// set_iteration_time go to the results file.
benchmark::internal::Benchmark* register_kernel_case(const std::string& name,
                                                     std::function<void(benchmark::State&)> fn);

// The iteration's time, for Google Benchmark and for the results file.
void set_iteration_time(benchmark::State& state, double seconds);

// The display reporter --benchmark_format asks for (console, json, csv), that also writes every
// run it reports as /kernel_bench/<case> through writer.
class ResultsFileReporter final : public benchmark::BenchmarkReporter {
 public:
  ResultsFileReporter(const std::string& format, ResultsWriter& writer);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;
  std::size_t cases_written() const { return written_; }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> display_;
  ResultsWriter& writer_;
  std::size_t written_ = 0;
};

// The results-file name of a run: its registered name with '/' as '_', "_rep<r>" after the
// first repetition.
std::string kernel_case_name(const std::string& registered, long repetition);

}  // namespace suite::bench

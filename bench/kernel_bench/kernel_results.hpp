// kernel_bench's results file (the suite's HDF5 contract, docs/RESULTS_SCHEMA.md): one case
// group per Google Benchmark run, with its per-iteration times, its rate beside the device's
// peak and the kernel and library that ran, so compare, history and the plots track the
// kernels' F from run to run as they track the methods.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "common/harness/display_reporter.hpp"
#include "common/results/results.hpp"

namespace suite::bench {

// Registers fn under name (manual time); the iteration times it reports through
// set_iteration_time go to the results file.
benchmark::internal::Benchmark* register_kernel_case(const std::string& name,
                                                     std::function<void(benchmark::State&)> fn);

// The iteration's time, for Google Benchmark and for the results file.
void set_iteration_time(benchmark::State& state, double seconds);

// Google Benchmark's own display reporter (as --benchmark_format, _color and
// _counters_tabular set it; create after benchmark::Initialize), that also writes every run
// as /kernel_bench/<case> through writer. aggregates_only: the display shows only the
// repetitions' aggregates (--benchmark_{report,display}_aggregates_only, which kernel_bench
// takes out of Google Benchmark's hands so that the file still gets every run).
class ResultsFileReporter final : public benchmark::BenchmarkReporter {
 public:
  ResultsFileReporter(ResultsWriter& writer, bool aggregates_only);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;
  std::size_t cases_written() const { return written_; }

 private:
  DisplayReporter display_;  // rows as each case ends (no progress lines to keep apart)
  ResultsWriter& writer_;
  bool aggregates_only_;
  std::size_t written_ = 0;
};

// The results-file name of a run: its registered name with '/' as '_', "_rep<r>" after the
// first repetition.
std::string kernel_case_name(const std::string& registered, long repetition);

}  // namespace suite::bench

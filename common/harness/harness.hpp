// Google Benchmark glue for MPI jobs. Every rank registers the same cases and runs them in
// the same order with a fixed iteration count; each iteration's time is the max over ranks
// (MPI_Allreduce MAX), set as manual time; rank 0 alone prints and writes results.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "common/harness/watchdog.hpp"
#include "common/results/results.hpp"

namespace suite {

class Harness {
 public:
  // writer is non-null on rank 0 only.
  Harness(BenchContext& ctx, ResultsWriter* writer, Watchdog& watchdog);

  void register_cases(const std::vector<CaseSpec>& specs);
  // Sets the "[i/N]" progress total to the runs Google Benchmark will make: the registered
  // cases its --benchmark_filter selects (a regular expression searched in each name, a
  // leading '-' negating it), times --benchmark_repetitions. Throws UsageError for a filter
  // that is not a regular expression.
  void expect_runs(const std::string& filter, int repetitions);
  // Records of the cases written so far (rank 0; attributes and params only are relied on).
  const std::vector<CaseRecord>& records() const { return records_; }
  bool any_check_failed() const { return check_failed_; }
  // Rank 0: records in the file which cases were skipped and why (set-up failed on a rank).
  void note_skipped_cases(ResultsWriter& writer) const;

 private:
  void run_case(benchmark::State& state, const CaseSpec& spec);
  // Lifetime bytes this rank moved on ctx.comm and on every communicator of the run's meshes:
  // all of a case's traffic, whichever groups it runs on.
  ByteCounts comm_bytes() const;
  // Warm-up, then the timed iterations; bytes_at_start: comm_bytes() when the timed iterations
  // began.
  std::vector<double> timed_loop(benchmark::State& state, BenchCase& c, PhaseTimer& phases,
                                 const std::string& label, std::vector<double>& step_times,
                                 ByteCounts& bytes_at_start);
  CheckOutcome agreed_check(BenchCase& c, const std::string& label);
  void fill_tables(BenchCase& c, const std::vector<double>& local_times, const PhaseTimer& phases,
                   const ByteCounts& timed_bytes, CaseRecord& rec);
  void publish(benchmark::State& state, const CaseSpec& spec, CaseRecord& rec);

  BenchContext& ctx_;
  ResultsWriter* writer_;
  Watchdog& watchdog_;
  std::vector<CaseRecord> records_;
  std::vector<std::string> skipped_;
  std::vector<std::string> registered_;  // Google Benchmark's names of the registered cases
  std::size_t total_cases_ = 0, started_ = 0;
  bool check_failed_ = false;
};

}  // namespace suite

#include "common/harness/harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include "common/harness/errors.hpp"
#include "common/harness/injected_slowdown.hpp"
#include "common/mesh/device_meshes.hpp"
#include "common/results/record_access.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite {
namespace {

// Test hook: SUITE_ABORT_AFTER_CASES=N makes rank 0 die hard after writing N cases, to prove
// that a killed run keeps its finished cases in FILE.partial.
long env_long(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atol(v) : -1;
}
long abort_after_cases() {
  return env_long("SUITE_ABORT_AFTER_CASES");
}

// Test hook: SUITE_TEST_FAIL_CHECK_RANK=R makes rank R's checks fail, to prove that one
// rank's failed check is agreed on, recorded as check_passed=0 and turns the exit status to 1.
bool injected_check_failure(int rank) {
  return env_long("SUITE_TEST_FAIL_CHECK_RANK") == rank;
}

// Test hook: SUITE_TEST_STALL_RANK=R makes rank R stop making progress in the first case's
// set-up, as a rank stuck outside a collective would, to prove the watchdog names the hang.
void maybe_stall(int rank) {
  if (env_long("SUITE_TEST_STALL_RANK") == rank) std::this_thread::sleep_for(std::chrono::hours(1));
}

// Per phase: the median over iterations of the slowest rank's time (the same rule as the step).
std::vector<std::pair<std::string, double>> phase_medians(const PhaseTimer& phases) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, values] : phases.series()) {
    std::vector<double> slowest(values.size());
    SUITE_MPI_CHECK(MPI_Allreduce(values.data(), slowest.data(), static_cast<int>(values.size()),
                                  MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    out.emplace_back(name, percentile(slowest, 0.5));
  }
  return out;
}

}  // namespace

Harness::Harness(BenchContext& ctx, ResultsWriter* writer, Watchdog& watchdog)
    : ctx_(ctx), writer_(writer), watchdog_(watchdog) {}

ByteCounts Harness::comm_bytes() const {
  std::vector<const Comm*> all = ctx_.meshes.comms();
  if (std::find(all.begin(), all.end(), &ctx_.comm) == all.end()) all.push_back(&ctx_.comm);
  return lifetime_bytes_of(all);
}

void Harness::register_cases(const std::vector<CaseSpec>& specs) {
  total_cases_ += specs.size();
  for (const auto& spec : specs) {
    const std::string name = ctx_.bench + "/" + spec.name;
    benchmark::RegisterBenchmark(name.c_str(),
                                 [this, spec](benchmark::State& st) { run_case(st, spec); })
        ->UseManualTime()
        ->Iterations(ctx_.opts.iters)
        ->Unit(benchmark::kMicrosecond);
    // The full name Google Benchmark matches its filter against.
    registered_.push_back(name + "/iterations:" + std::to_string(ctx_.opts.iters) + "/manual_time");
  }
}

void Harness::expect_runs(const std::string& filter, int repetitions) {
  std::string spec = filter.empty() || filter == "all" ? "." : filter;
  const bool negative = spec[0] == '-';
  if (negative) spec.erase(0, 1);
  std::regex re;
  try {
    re = std::regex(spec, std::regex::extended);
  } catch (const std::regex_error& e) {
    throw UsageError("--benchmark_filter=" + filter + ": not a regular expression (" + e.what() +
                     ")");
  }
  std::size_t selected = 0;
  for (const auto& name : registered_)
    selected += std::regex_search(name, re) != negative;
  total_cases_ = selected * static_cast<std::size_t>(std::max(1, repetitions));
}

void Harness::run_case(benchmark::State& state, const CaseSpec& spec) {
  const int rank = ctx_.mpi.rank();
  std::string label = "case " + ctx_.bench + "/" + spec.name;
  if (rank == 0) {
    std::fflush(stdout);  // the previous case's console line first, also when redirected
    std::fprintf(stderr, "[%zu/%zu] %s\n", ++started_, total_cases_, spec.name.c_str());
    std::fflush(stderr);
  }
  watchdog_.kick(label + " (setup)");
  maybe_stall(rank);
  // The case's memory is what the allocator hands out from here to the end of its timed steps
  // (on a GPU also the drop of free device memory, which includes libraries' buffers).
  Device& dev = ctx_.device;
  const std::int64_t live_before = dev.allocation_counters().live;
  dev.reset_allocation_peak();
  const bool on_gpu = ctx_.backend == Backend::cuda;
  const double free_before = on_gpu ? static_cast<double>(dev.memory_available()) : 0.0;
  // What the case made for itself in the meshes (DeviceMesh::case_group) goes after the case.
  struct EndCase {
    DeviceMeshes& meshes;
    ~EndCase() { meshes.end_case(); }
  } end_case{ctx_.meshes};
  std::unique_ptr<BenchCase> c;
  std::optional<std::string> error;
  std::int64_t payload_start = 0;  // bytes this rank hands its transports over the whole case
  try {
    c = spec.make();
    payload_start = comm_bytes().sent;
    c->setup();
  } catch (const std::exception& e) {
    error = e.what();
  }
  watchdog_.kick(label + " (setup done, waiting for the other ranks)", true);
  if (auto agreed = agree_on_error(error)) {
    if (rank == 0) {
      std::fprintf(stderr, "  skipped %s: %s\n", spec.name.c_str(), agreed->c_str());
      skipped_.push_back(spec.name + ": " + *agreed);
    }
    state.SkipWithError(agreed->c_str());
    watchdog_.pause();
    return;
  }

  PhaseTimer phases(ctx_.device);
  std::vector<double> step_times;
  ByteCounts bytes_at_start;
  std::vector<double> local_times =
      timed_loop(state, *c, phases, label, step_times, bytes_at_start);

  dev.synchronize();
  const AllocationCounters after = dev.allocation_counters();
  const double free_drop =
      on_gpu ? free_before - static_cast<double>(dev.memory_available()) : std::nan("");
  // Snapshot before the check, whose own collectives must not count as the step's traffic.
  ByteCounts timed_bytes = comm_bytes();
  timed_bytes.sent -= bytes_at_start.sent;
  timed_bytes.recv -= bytes_at_start.recv;
  CaseRecord rec{ctx_.bench, spec.name, spec.params, {}, {}, {}, {}};
  Measurement m;
  m.step = summarize(step_times);
  m.iterations = static_cast<int>(step_times.size());
  m.bytes_sent_per_iter = static_cast<double>(timed_bytes.sent) / std::max(1, m.iterations);
  m.bytes_recv_per_iter = static_cast<double>(timed_bytes.recv) / std::max(1, m.iterations);
  m.phase_median_s = phase_medians(phases);
  rec.attrs = {{"iterations", std::int64_t{m.iterations}},
               {"warmup", std::int64_t{ctx_.opts.warmup}},
               {"time_median_s", m.step.median},
               {"time_p10_s", m.step.p10},
               {"time_p90_s", m.step.p90},
               {"time_min_s", m.step.min},
               {"time_max_s", m.step.max},
               {"time_mean_s", m.step.mean}};
  for (const auto& [name, median] : m.phase_median_s)
    rec.attrs.emplace_back("phase_" + name + "_median_s", median);
  // Rank 0's figures in the attributes (every rank's in the datasets below).
  rec.attrs.emplace_back("memory_allocated_peak_bytes",
                         static_cast<double>(after.peak - live_before));
  rec.attrs.emplace_back("memory_allocated_live_bytes",
                         static_cast<double>(after.live - live_before));
  rec.attrs.emplace_back("device_memory_drop_bytes", free_drop);
  const int ranks = ctx_.mpi.size();
  rec.int_tables.push_back({"allocated_peak_bytes", 1, static_cast<std::size_t>(ranks),
                            gather_int(after.peak - live_before, ranks, rank)});

  CheckOutcome check = agreed_check(*c, label);
  const bool checked = ctx_.opts.check && !check.skipped;
  rec.attrs.emplace_back("check_passed", std::int64_t{checked ? (check.passed ? 1 : 0) : -1});
  if (check.skipped) rec.attrs.emplace_back("check_note", "skipped: " + check.detail);
  rec.attrs.emplace_back("check_max_abs_err",
                         checked ? check.max_abs_err : NAN);  // NaN: not measured
  watchdog_.kick(label + " (report)");
  c->report(m, rec);
  // The whole case's payload (set-up, warm-up, timed steps, check, report's own runs): what a
  // library-side count of the same run (scripts/envs/wire_bytes.py, MPI monitoring) compares with.
  const std::int64_t payload = comm_bytes().sent - payload_start;
  rec.attrs.emplace_back("payload_bytes_sent_case", static_cast<double>(payload));
  rec.int_tables.push_back({"case_payload_bytes_sent", 1, static_cast<std::size_t>(ranks),
                            gather_int(payload, ranks, rank)});
  fill_tables(*c, local_times, phases, timed_bytes, rec);
  publish(state, spec, rec);
}

std::vector<double> Harness::timed_loop(benchmark::State& state, BenchCase& c, PhaseTimer& phases,
                                        const std::string& label, std::vector<double>& step_times,
                                        ByteCounts& bytes_at_start) {
  Device& dev = ctx_.device;
  try {
    for (int i = 0; i < ctx_.opts.warmup; ++i) {
      watchdog_.kick(label + " (warm-up " + std::to_string(i) + ")");
      phases.begin_step();
      c.step(phases);
      phases.end_step(false);
    }
    dev.synchronize();
    bytes_at_start = comm_bytes();
    auto timer = dev.make_timer();
    const double slowdown = injected_slowdown();
    std::vector<double> local;
    int i = 0;
    for (auto _ : state) {
      const std::string iteration = label + " (iteration " + std::to_string(i++);
      watchdog_.kick(iteration + ", waiting for the other ranks to start it)", true);
      // Start together: the time then measures the step, not the skew between ranks.
      dev.synchronize();
      SUITE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      watchdog_.kick(iteration + ")");
      phases.begin_step();
      const auto begun = SlowdownClock::now();
      timer->start();
      c.step(phases);
      if (slowdown > 0) busy_wait_until(stretched_end(begun, SlowdownClock::now(), slowdown));
      timer->stop();
      double t = timer->seconds();
      phases.end_step(true);
      local.push_back(t);
      watchdog_.kick(iteration + " done, waiting for the other ranks)", true);
      double step = all_reduce_max(t);
      step_times.push_back(step);
      state.SetIterationTime(step);
    }
    return local;
  } catch (const std::exception& e) {
    // Other ranks are inside collectives of this step: only a job-wide abort avoids a hang.
    SUITE_FATAL(label + ": " + e.what());
  }
}

CheckOutcome Harness::agreed_check(BenchCase& c, const std::string& label) {
  if (!ctx_.opts.check) return {true, 0, ""};
  if (sim::modeled())  // no kernel ran: nothing to check
    return {true, 0, "modeled compute (--sim-flops): kernels skipped, outputs not computed", true};
  watchdog_.kick(label + " (check)");
  CheckOutcome mine;
  try {
    mine = c.check();
  } catch (const std::exception& e) {
    mine = {false, 0, e.what()};
  }
  if (injected_check_failure(ctx_.mpi.rank()))
    mine = {false, 0, "failure injected by SUITE_TEST_FAIL_CHECK_RANK"};
  watchdog_.kick(label + " (check done, waiting for the other ranks)", true);
  if (auto why =
          agree_on_error(mine.skipped ? std::optional<std::string>(mine.detail) : std::nullopt)) {
    if (ctx_.mpi.rank() == 0)
      std::fprintf(stderr, "  check skipped %s: %s\n", label.c_str(), why->c_str());
    return {true, 0, *why, true};
  }
  auto first_failure =
      agree_on_error(mine.passed ? std::nullopt : std::optional<std::string>(mine.detail));
  CheckOutcome agreed{!first_failure, all_reduce_max(mine.max_abs_err), first_failure.value_or("")};
  if (!agreed.passed) {
    check_failed_ = true;
    if (ctx_.mpi.rank() == 0)
      std::fprintf(stderr, "  CHECK FAILED %s: %s (max abs error %g)\n", label.c_str(),
                   agreed.detail.c_str(), agreed.max_abs_err);
  }
  return agreed;
}

void Harness::fill_tables(BenchCase& c, const std::vector<double>& local_times,
                          const PhaseTimer& phases, const ByteCounts& timed_bytes,
                          CaseRecord& rec) {
  const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
  const std::size_t iters = local_times.size();
  rec.tables.push_back(
      {"time_s", iters, static_cast<std::size_t>(ranks), gather_columns(local_times, ranks, rank)});
  for (const auto& [name, values] : phases.series())
    rec.tables.push_back({"phase_" + name + "_s", iters, static_cast<std::size_t>(ranks),
                          gather_columns(values, ranks, rank)});
  auto per_iter = [&](std::int64_t total) {
    return total / std::max<std::int64_t>(1, static_cast<std::int64_t>(iters));
  };
  rec.int_tables.push_back({"bytes_sent", 1, static_cast<std::size_t>(ranks),
                            gather_int(per_iter(timed_bytes.sent), ranks, rank)});
  rec.int_tables.push_back({"bytes_recv", 1, static_cast<std::size_t>(ranks),
                            gather_int(per_iter(timed_bytes.recv), ranks, rank)});
  if (!ctx_.opts.save_tensors) return;
  auto tensors = c.tensors();
  if (tensors.empty())
    rec.attrs.emplace_back("tensors_note", std::string("not saved: above 1M elements per rank"));
  for (auto& t : tensors) {
    // Same length on every rank by construction of the cases; gathered as [ranks, n].
    std::vector<double> by_rank = gather_rows(t.values, ranks, rank);
    rec.tables.push_back(
        {"tensor_" + t.name, static_cast<std::size_t>(ranks), t.values.size(), by_rank});
  }
}

void Harness::note_skipped_cases(ResultsWriter& writer) const {
  if (skipped_.empty()) return;
  std::string all;
  for (const auto& s : skipped_)
    all += (all.empty() ? "" : "\n") + s;
  writer.set_attr("skipped_cases", all);
  std::fprintf(stderr, "%zu case(s) skipped; listed in the file attribute skipped_cases\n",
               skipped_.size());
}

void Harness::publish(benchmark::State& state, const CaseSpec& spec, CaseRecord& rec) {
  for (const auto& name : spec.console_counters)
    state.counters[name] = attr_number(rec, name);
  if (ctx_.mpi.rank() != 0) {
    watchdog_.pause();
    return;
  }
  // Repetitions (--benchmark_repetitions) run a case again: keep each under its own name.
  std::size_t seen = 0;
  for (const auto& r : records_)
    seen += r.name == spec.name || r.name.rfind(spec.name + "_rep", 0) == 0;
  if (seen) rec.name += "_rep" + std::to_string(seen);
  watchdog_.pause();
  try {
    writer_->write_case(rec);
  } catch (const std::exception& e) {
    SUITE_FATAL(std::string("writing results: ") + e.what());
  }
  rec.tables.clear();  // the summary needs only attributes; free the samples
  rec.int_tables.clear();
  records_.push_back(std::move(rec));
  long limit = abort_after_cases();
  if (limit >= 0 && static_cast<long>(records_.size()) >= limit) {
    std::fprintf(stderr, "SUITE_ABORT_AFTER_CASES=%ld reached: aborting the job on purpose\n",
                 limit);
    MPI_Abort(MPI_COMM_WORLD, 9);
  }
}

}  // namespace suite

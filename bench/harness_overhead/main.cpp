// harness_overhead: what the suite's machinery (Comm interface, byte counting, timers,
// per-iteration max-reduce) costs on top of a plain MPI_Allreduce loop at the same sizes.
// Target: a ratio within 1.05 from 1 MiB up; reported, never asserted by the tests.
#include <CLI/CLI.hpp>

#include <mpi.h>

#include <cstdio>

#include "common/device/typed_host.hpp"
#include "common/harness/bench_main.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"
#include "common/harness/stats.hpp"

namespace {

class OverheadCase final : public suite::BenchCase {
 public:
  OverheadCase(suite::BenchContext& ctx, std::int64_t n_bytes) : ctx_(ctx), n_bytes_(n_bytes) {}

  void setup() override {
    count_ = static_cast<std::size_t>(n_bytes_) / suite::dtype_size(ctx_.dtype);
    send_ = ctx_.device.alloc(n_bytes_);
    recv_ = ctx_.device.alloc(n_bytes_);
    auto bytes = suite::encode(std::vector<double>(count_, 1.0), ctx_.dtype);
    ctx_.device.copy_from_host(send_.data(), bytes.data(), bytes.size());
  }

  void step(suite::PhaseTimer&) override {
    ctx_.comm.all_reduce(send_.data(), recv_.data(), count_, ctx_.dtype);
  }

  // The reference: the same all-reduce as a bare loop, timed the same way (barrier, wall
  // clock around the call, max over ranks, median).
  void report(const suite::Measurement& m, suite::CaseRecord& rec) override {
    suite::Attributes& attrs = rec.attrs;
    MPI_Datatype type = ctx_.dtype == suite::DType::fp64 ? MPI_DOUBLE : MPI_FLOAT;
    std::vector<double> steps;
    for (int i = 0; i < ctx_.opts.warmup + m.iterations; ++i) {
      SUITE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      double t0 = MPI_Wtime();
      SUITE_MPI_CHECK(MPI_Allreduce(send_.data(), recv_.data(), static_cast<int>(count_), type,
                                    MPI_SUM, MPI_COMM_WORLD));
      double t = MPI_Wtime() - t0;
      if (i >= ctx_.opts.warmup) steps.push_back(suite::all_reduce_max(t));
    }
    double plain = suite::percentile(steps, 0.5);
    attrs.emplace_back("plain_mpi_median_s", plain);
    attrs.emplace_back("ratio", plain > 0 ? m.step.median / plain : 0.0);
    attrs.emplace_back("pred_ratio", 1.0);
    attrs.emplace_back("target_ratio_max", 1.05);
  }

 private:
  suite::BenchContext& ctx_;
  std::int64_t n_bytes_;
  std::size_t count_ = 0;
  suite::Buffer send_, recv_;
};

const char* const kDescription =
    "The suite's all-reduce (through the Comm interface and the harness) against a plain "
    "MPI_Allreduce\n"
    "loop at the same sizes, both timed per iteration after a barrier, max over ranks, median.\n"
    "ratio = suite / plain; target <= 1.05 at 1 MiB and above. CPU backend, MPI transport.";

// One case per size of the sweep.
std::vector<suite::CaseSpec> overhead_cases(suite::BenchContext& ctx, const std::string& sizes) {
  if (ctx.backend != suite::Backend::cpu || ctx.comm.transport() != suite::Transport::mpi)
    throw suite::UsageError(
        "harness_overhead compares against plain MPI on host buffers: use --backend cpu");
  std::vector<suite::CaseSpec> specs;
  const auto e = static_cast<std::int64_t>(suite::dtype_size(ctx.dtype));
  for (auto n : suite::parse_sweep(sizes)) {
    if (static_cast<std::size_t>(n / e) > ctx.comm.max_count())
      throw suite::UsageError("size " + std::to_string(n) +
                              " is above MPI's count limit for one call");
    if (n <= 0 || n % e != 0)
      throw suite::UsageError("size " + std::to_string(n) +
                              " is not a multiple of the element size");
    suite::CaseSpec spec;
    spec.name = "allreduce_" + std::string(suite::dtype_name(ctx.dtype)) + "_n" +
                suite::format_scaled_int(n);
    spec.params = {{"op", std::string("allreduce")},
                   {"dtype", std::string(suite::dtype_name(ctx.dtype))},
                   {"n_bytes", n}};
    spec.make = [&ctx, n] { return std::make_unique<OverheadCase>(ctx, n); };
    spec.console_counters = {"ratio"};
    specs.push_back(std::move(spec));
  }
  return specs;
}

void print_overhead_table(const std::vector<suite::CaseRecord>& records) {
  std::printf("\nHarness overhead (median step time, max over ranks)\n%-28s %12s %12s %8s\n",
              "case", "suite_us", "plain_us", "ratio");
  for (const auto& r : records) {
    double suite_t = 0, plain = 0, ratio = 0;
    for (const auto& [name, v] : r.attrs) {
      if (name == "time_median_s") suite_t = std::get<double>(v);
      if (name == "plain_mpi_median_s") plain = std::get<double>(v);
      if (name == "ratio") ratio = std::get<double>(v);
    }
    std::printf("%-28s %12.1f %12.1f %8.3f\n", r.name.c_str(), suite_t * 1e6, plain * 1e6, ratio);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes = "4K:16M:x4";
  return suite::run_benchmark(
      argc, argv,
      {.name = "harness_overhead",
       .description = kDescription,
       .add_options = [&](CLI::App& app) { suite::add_sizes_flag(app, sizes); },
       .make_cases = [&](suite::BenchContext& ctx) { return overhead_cases(ctx, sizes); },
       .summarize =
           [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
             print_overhead_table(records);
           }});
}

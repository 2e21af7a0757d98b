#include "common/harness/bench_main.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>

#include <unistd.h>

#include "common/device/cpu_info.hpp"
#include "common/harness/benchmark_flags.hpp"
#include "common/harness/display_reporter.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/harness.hpp"
#include "common/harness/watchdog.hpp"
#include "common/mesh/device_meshes.hpp"
#include "common/results/run_info.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/comm.hpp"
#include "kernels/core/blas_cpu_rerun.hpp"

namespace suite {
namespace {

// Google Benchmark prints nothing on ranks other than 0.
class NullReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

std::vector<char*> as_argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args)
    out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

std::string join(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i)
    s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

struct Resolved {
  Backend backend = Backend::cpu;
  Transport transport = Transport::mpi;
  DType dtype = DType::fp32;
};

// Turns "auto" choices into concrete ones and rejects combinations that cannot work.
Resolved resolve(const CommonOptions& o, const BenchDefinition& def) {
  Resolved r;
  int gpus = visible_cuda_devices();
  int min_gpus = gpus;
  SUITE_MPI_CHECK(MPI_Allreduce(&gpus, &min_gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (o.backend == "auto")
    r.backend = min_gpus > 0 ? Backend::cuda : Backend::cpu;
  else
    r.backend = o.backend == "cuda" ? Backend::cuda : Backend::cpu;
  if (r.backend == Backend::cuda && gpus == 0)
    throw UsageError("--backend cuda: no CUDA device is visible to " + rank_label() +
                     (visible_cuda_devices() == 0 ? " (or this build has no CUDA support)" : ""));
  if (o.transport == "auto")
    r.transport = r.backend == Backend::cuda ? Transport::nccl : Transport::mpi;
  else
    r.transport = o.transport == "nccl" ? Transport::nccl : Transport::mpi;
  if (r.transport == Transport::nccl && r.backend == Backend::cpu)
    throw UsageError("--transport nccl needs --backend cuda; the CPU backend uses --transport mpi");
  const auto& allowed = r.backend == Backend::cuda ? def.cuda_dtypes : def.cpu_dtypes;
  if (o.dtype == "auto") {
    r.dtype = r.backend == Backend::cuda ? DType::bf16 : DType::fp32;
    if (std::find(allowed.begin(), allowed.end(), r.dtype) == allowed.end())
      r.dtype = allowed.front();
  } else {
    r.dtype = *parse_dtype(o.dtype);
  }
  // Modeled compute (SMPI build) computes nothing: bf16 only sets the sizes on the wire.
  const bool modeled_bf16 = sim::modeled() && r.dtype == DType::bf16;
  if (!modeled_bf16 && std::find(allowed.begin(), allowed.end(), r.dtype) == allowed.end()) {
    std::string names;
    for (auto t : allowed)
      names += (names.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw UsageError("--dtype " + std::string(dtype_name(r.dtype)) + " is not supported on the " +
                     std::string(backend_name(r.backend)) + " backend (supported: " + names + ")");
  }
  return r;
}

// NCCL refuses two ranks on one GPU, and would say so only from deep inside its init.
// Compares physical GPU identities, so any CUDA_VISIBLE_DEVICES binding is judged right.
void refuse_shared_gpus(const Device& device) {
  auto ids = all_gather_strings(device.uuid());
  auto hosts = all_gather_strings(rank_label());
  for (std::size_t a = 0; a < ids.size(); ++a)
    for (std::size_t b = a + 1; b < ids.size(); ++b)
      if (ids[a] == ids[b])
        throw UsageError(
            "NCCL needs one GPU per rank, but " + hosts[a] + " and " + hosts[b] + " share GPU " +
            ids[a] +
            "; use --transport mpi (CUDA-aware or host-staged), or start one rank per GPU");
}

// Every rank reaches the same verdict; rank 0 prints it once. Returns true when all is well.
bool agreed_ok(const std::optional<std::string>& error, int rank) {
  auto agreed = agree_on_error(error);
  if (agreed && rank == 0)
    std::fprintf(stderr, "error: %s\n(run with --help for the flags)\n", agreed->c_str());
  return !agreed;
}

template <class F>
std::optional<std::string> capture(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// Google Benchmark's flags, checked before anything runs: its own parser ignores unknown
// --benchmark_* names and exits (on every rank) on bad values, which would leave the job
// without MPI_Finalize and a results file behind.
void init_google_benchmark(std::vector<std::string>& flags, int rank) {
  // Only rank 0 may write Google Benchmark's own output file.
  if (rank != 0)
    std::erase_if(flags, [](const std::string& a) { return a.rfind("--benchmark_out=", 0) == 0; });
  for (const auto& a : flags) {
    check_benchmark_values(a);
    if (auto path = flag_value(a, "--benchmark_out")) {
      std::ofstream probe(*path, std::ios::app);
      if (!probe) throw UsageError(a + ": cannot write that file");
    }
  }
  std::vector<char*> argv = as_argv(flags);
  int argc = static_cast<int>(flags.size());
  benchmark::Initialize(&argc, argv.data());
  if (argc > 1) throw UsageError(std::string("unknown Google Benchmark flag ") + argv[1]);
}

// With --benchmark_format=json or csv, stdout is Google Benchmark's machine-readable report:
// the suite's own summary table and results line go to stderr instead, for as long as this
// lives.
class HumanOutputAside {
 public:
  explicit HumanOutputAside(const std::vector<std::string>& flags) {
    if (last_flag_value(flags, "--benchmark_format", "console") == "console") return;
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    if (saved_ >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~HumanOutputAside() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    dup2(saved_, STDOUT_FILENO);
    close(saved_);
  }
  HumanOutputAside(const HumanOutputAside&) = delete;
  HumanOutputAside& operator=(const HumanOutputAside&) = delete;

 private:
  int saved_ = -1;
};

// Runs the registered cases; rank 0 prints (console or --benchmark_format, plus
// --benchmark_out), the others stay silent. Returns how many cases matched the filter.
std::size_t run_registered(int rank) {
  if (rank == 0) {
    DisplayReporter display(benchmark::CreateDefaultDisplayReporter());
    return benchmark::RunSpecifiedBenchmarks(&display);
  }
  static std::ostream silent(nullptr);
  NullReporter quiet;
  quiet.SetOutputStream(&silent);
  quiet.SetErrorStream(&silent);
  return benchmark::RunSpecifiedBenchmarks(&quiet);
}

}  // namespace

int run_benchmark(int argc, char** argv, const BenchDefinition& def) {
  // Before MPI and the first BLAS call: may start the process again on other BLAS kernels.
  // Not in the SMPI build, whose ranks are threads of the simulator's one process.
  if (!sim::kSmpiBuild) kernels::cpu::rerun_on_cpu_blas_core(argv, cpu_flags());
  select_gpu_before_mpi(argc, argv);
  MpiSession mpi(&argc, &argv);
  const int rank = mpi.rank();
  CommonOptions opts;
  CLI::App app(def.description, def.name);
  app.footer(common_help_footer() + sim::help_footer());
  // A flag given twice takes its last value, so wrappers can append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_common_options(app, opts);
  sim::add_options(app);  // --sim-flops, SMPI build only
  if (def.add_options) def.add_options(app);
  if (def.mesh || def.axis_order) add_mesh_order_flag(app, opts.order);

  SplitArgs args;
  bool help = false;
  auto parse_error = capture([&] {
    args = split_benchmark_flags(argc, argv);
    std::vector<std::string> ours(args.ours.rbegin(),
                                  args.ours.rend() - 1);  // CLI11: reversed, no argv[0]
    try {
      app.parse(ours);
    } catch (const CLI::CallForHelp&) {
      help = true;
    } catch (const CLI::ExtrasError&) {
      // CLI11's own message lists them in the reversed order it was handed them.
      std::string extras;
      for (const std::string& a : app.remaining())
        extras += (extras.empty() ? "" : " ") + a;
      throw UsageError("unknown flag or stray value: " + extras);
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    if (!help) init_google_benchmark(args.benchmark, rank);
    if (!help) sim::validate(opts.backend, opts.transport, opts.dtype);
  });
  if (!agreed_ok(parse_error, rank)) return 2;
  if (help) {
    if (rank == 0) std::printf("%s", app.help().c_str());
    return 0;
  }
  if (auto note = kernels::cpu::blas_core_note(); note && rank == 0)
    std::fprintf(stderr, "note: %s\n", note->c_str());

  // Before the transports, which tell it of their waits (and destroyed after them); unarmed
  // until the first case kicks it.
  // Off in the SMPI build: its thread may not call MPI inside the simulator.
  Watchdog watchdog(sim::kSmpiBuild ? 0.0 : opts.timeout_s, mpi.thread_multiple(), mpi.rank(),
                    mpi.size());
  std::optional<Resolved> resolved;
  std::unique_ptr<Device> device;
  std::unique_ptr<Comm> comm;
  auto setup_error = capture([&] {
    resolved = resolve(opts, def);
    device =
        resolved->backend == Backend::cuda ? make_cuda_device(mpi.local_rank()) : make_cpu_device();
  });
  if (!agreed_ok(setup_error, rank)) return 2;
  const Resolved r = *resolved;
  if (r.transport == Transport::nccl &&
      !agreed_ok(capture([&] { refuse_shared_gpus(*device); }), rank))
    return 2;
  // NCCL's own set-up is collective, so it is created only once every rank has a device.
  auto comm_error = capture([&] {
    comm = r.transport == Transport::nccl ? make_nccl_comm(*device, MPI_COMM_WORLD)
                                          : make_mpi_comm(*device, MPI_COMM_WORLD);
  });
  if (!agreed_ok(comm_error, rank)) return 2;
  comm->set_wait_observer(&watchdog);

  // The benchmark's group (--tp, --cp, --ep): its own mesh's axis.
  DeviceMeshes meshes(*device, *comm);
  Comm* group = comm.get();
  if (def.mesh) {
    auto mesh_error = capture([&] {
      AxisMesh own = def.mesh(mpi.size());
      own.shape.order = one_mesh_order(opts.order, def.name);
      meshes.set_own(own.shape);
      group = &meshes.own().axis(own.axis);
    });
    if (!agreed_ok(mesh_error, rank)) return 2;
  }
  BenchContext ctx{mpi, opts, def.name, r.backend, r.dtype, *device, *group, meshes};
  std::vector<CaseSpec> cases;
  if (!agreed_ok(capture([&] { cases = def.make_cases(ctx); }), rank)) return 2;
  // A value listed twice (--layout zigzag,zigzag) names one case twice: it runs once. The name
  // is built from every parameter, so equal names are equal cases.
  std::vector<CaseSpec> unique_cases;
  for (auto& spec : cases)
    if (std::none_of(unique_cases.begin(), unique_cases.end(),
                     [&](const CaseSpec& s) { return s.name == spec.name; }))
      unique_cases.push_back(std::move(spec));
  cases = std::move(unique_cases);

  int exit_code = 0;
  {
    if (flag_is_true(args.benchmark,
                     "--benchmark_list_tests")) {  // names only: nothing runs, no results file
      Harness harness(ctx, nullptr, watchdog);
      harness.register_cases(cases);
      run_registered(rank);
      benchmark::Shutdown();
      comm.reset();
      return 0;
    }
    std::unique_ptr<ResultsWriter> writer;
    std::string out = opts.out.empty() ? default_results_path(def.name) : opts.out;
    if (!agreed_ok(capture([&] {
                     if (rank == 0) writer = std::make_unique<ResultsWriter>(out);
                   }),
                   rank))
      return 2;
    RunInfo info = collect_run_info(ctx, join(argc, argv));
    Harness harness(ctx, writer.get(), watchdog);
    harness.register_cases(cases);
    std::size_t matched = 0;
    try {
      harness.expect_runs(
          last_flag_value(args.benchmark, "--benchmark_filter", ""),
          std::stoi(last_flag_value(args.benchmark, "--benchmark_repetitions", "1")));
      if (rank == 0) writer->write_run_info(info);
      matched = run_registered(rank);
    } catch (const std::exception& e) {
      SUITE_FATAL(std::string("results: ") + e.what());
    }
    benchmark::Shutdown();
    watchdog.pause();
    if (matched == 0) {
      if (rank == 0) {
        writer->discard();
        std::fprintf(stderr, "error: --benchmark_filter matches none of the %zu cases\n",
                     cases.size());
      }
      comm.reset();
      return 2;
    }
    if (rank == 0) {
      HumanOutputAside aside(args.benchmark);
      try {
        if (def.summarize) def.summarize(ctx, harness.records());
        harness.note_skipped_cases(*writer);
        writer->finish();
      } catch (const std::exception& e) {
        SUITE_FATAL(std::string("finishing results: ") + e.what());
      }
      std::printf("results: %s (%zu cases)\n", out.c_str(), harness.records().size());
    }
    exit_code = harness.any_check_failed() ? 1 : 0;
  }
  comm.reset();  // frees its MPI communicator before MPI_Finalize
  return exit_code;
}

}  // namespace suite

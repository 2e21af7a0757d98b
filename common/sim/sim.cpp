#include "common/sim/sim.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "common/harness/errors.hpp"
#include "common/sim/rank_local.hpp"

#if defined(SUITE_SMPI)
#include <mpi.h>
#include <simgrid/host.h>
#include <simgrid/version.h>
#include <smpi/smpi.h>

#include <xbt/config.hpp>
#endif

namespace suite::sim {
namespace {

// What each rank's simulation settings and scopes are. Per rank, not per process: every kernel
// seam (attention engine, MoE ops) reads them without a context to pass them through.
struct RankState {
  double modeled_flops = 0;  // F of modeled compute (0: executed)
  PlaceholderCounters placeholders;
  int keep_data = 0;         // KeepData scopes open
  int flop_batches = 0;      // FlopBatch scopes open
  double batched_flops = 0;  // and the FLOPs they hold back
};
RankLocal<RankState> g_rank_state;
RankState& rank_state() {
  return g_rank_state.get();
}

#if defined(SUITE_SMPI)
// The one region every placeholder of every rank points into, and its size: the process's.
struct PlaceholderRegion {
  void* base = nullptr;
  std::size_t bytes = 0;
};
PlaceholderRegion g_placeholder_region;
#endif

[[maybe_unused]] std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

#if defined(SUITE_SMPI)
// SimGrid speeds: a number with an optional unit (f, kf, Mf, Gf, Tf, Pf, or "flops").
double parse_speed(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  const char* prefixes = "kMGTPE";
  if (unit.empty() || unit == "f" || unit == "flops") return v;
  for (int i = 0; prefixes[i]; ++i)
    if (unit[0] == prefixes[i]) return v * std::pow(1e3, i + 1);
  return NAN;
}

bool computation_simulated() {
  return simgrid::config::get_value<bool>("smpi/simulate-computation");
}
#endif

}  // namespace

void add_options(CLI::App& app) {
  if (!kSmpiBuild) return;
  app.add_option("--sim-flops", rank_state().modeled_flops,
                 "SMPI build: modeled compute at F FLOP/s (e.g. a GPU's rate from kernel_bench): "
                 "attention and GEMM kernels are skipped and their exact FLOPs injected into the "
                 "simulated clock; checks are skipped. Without it, kernels run on the host "
                 "(executed compute)")
      ->check([](const std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end || !std::isfinite(v) || v <= 0)
          return "must be a positive number of FLOP/s, not '" + text + "'";
        return "";
      });
}

std::string help_footer() {
  if (!kSmpiBuild) return "";
  return "\nSMPI build (simulated cluster, suite simulate): every time is the simulated "
         "clock (MPI_Wtime);\n"
         "compute is executed on the host and injected (default) or modeled (--sim-flops F); "
         "--timeout is\n"
         "ignored (the watchdog is off: its thread may not call MPI inside the simulator); the "
         "CPU backend\n"
         "only (--backend cuda, --transport nccl and --dtype bf16 are refused).\n";
}

void validate(const std::string& backend, const std::string& transport, const std::string& dtype) {
  if (!kSmpiBuild) return;
  const std::string why =
      ": the SMPI build (make sim) simulates the CPU backend only; model a GPU's compute with "
      "--sim-flops F";
  if (backend == "cuda") throw UsageError("--backend cuda" + why);
  if (transport == "nccl") throw UsageError("--transport nccl" + why);
  if (dtype == "bf16" && !modeled())
    throw UsageError("--dtype bf16" + why + " (which takes bf16: its sizes, no values)");
#if defined(SUITE_SMPI)
  if (modeled() && computation_simulated())
    throw UsageError(
        "--sim-flops needs smpirun --cfg=smpi/simulate-computation:no (suite simulate sets "
        "it); otherwise the host's own time between MPI calls would be injected as well");
  if (!modeled() && !computation_simulated())
    throw UsageError(
        "executed compute needs smpi/simulate-computation:yes (the default); give --sim-flops F "
        "for modeled compute");
#endif
}

bool modeled() {
  return rank_state().modeled_flops > 0;
}

double modeled_flops() {
  return rank_state().modeled_flops;
}

void inject_flops(double flops) {
#if defined(SUITE_SMPI)
  RankState& state = rank_state();  // one lookup: this runs at every kernel seam
  if (!(state.modeled_flops > 0) || !(flops > 0)) return;
  if (state.flop_batches > 0) {
    state.batched_flops += flops;
    return;
  }
  // smpi_execute_flops runs at the simulated host's speed: scale so the time is flops / F.
  smpi_execute_flops(flops / state.modeled_flops * sg_host_get_speed(sg_host_self()));
#else
  (void)flops;
#endif
}

Buffer alloc_placeholder(std::size_t bytes) {
#if defined(SUITE_SMPI)
  RankState& state = rank_state();
  if (!(state.modeled_flops > 0) || state.keep_data > 0 || bytes < kPlaceholderMinBytes) return {};
  // Every placeholder of every rank points into one SMPI shared region, as large as the largest
  // placeholder asked for (plus room for the offsets below): a placeholder holds no values, so
  // they may overlap. One region keeps the process's mappings of SMPI's shared block few; one
  // per allocation made them tens of thousands at a thousand ranks, and the kernel's walks over
  // them (reclaim's access checks visit every mapping of a page) then took a core.
  // Consecutive placeholders start a page apart, so no two buffers of one call (an MPI send and
  // receive buffer) share an address. A larger request gets a larger region; placeholders
  // already handed out keep the old one, which stays mapped.
  constexpr std::size_t kPage = 4096, kStarts = 256;
  PlaceholderRegion& region = g_placeholder_region;
  PlaceholderCounters& counters = state.placeholders;
  if (bytes + kStarts * kPage > region.bytes) {
    region.bytes = bytes + kStarts * kPage;
    region.base = SMPI_SHARED_MALLOC(region.bytes);
    if (!region.base) throw std::bad_alloc();
  }
  static_assert(kStarts * kPage <= kPlaceholderMinBytes);
  std::byte* p = static_cast<std::byte*>(region.base) + (counters.allocations % kStarts) * kPage;
  counters.live_bytes += static_cast<std::int64_t>(bytes);
  ++counters.allocations;
  return Buffer(p, bytes, [&counters, bytes](void*) {
    counters.live_bytes -= static_cast<std::int64_t>(bytes);
  });
#else
  (void)bytes;
  return {};
#endif
}

bool is_placeholder(const void* p) {
#if defined(SUITE_SMPI)
  if (!modeled() || p == nullptr) return false;
  thread_local std::vector<std::pair<std::size_t, std::size_t>> private_blocks;
  std::size_t offset = 0;
  return smpi_is_shared(p, private_blocks, &offset) != 0;
#else
  (void)p;
  return false;
#endif
}

PlaceholderCounters placeholder_counters() {
  return rank_state().placeholders;
}

FlopBatch::FlopBatch() {
  ++rank_state().flop_batches;
}
FlopBatch::~FlopBatch() {
  RankState& state = rank_state();
  if (--state.flop_batches > 0) return;
  const double flops = state.batched_flops;
  state.batched_flops = 0;
  inject_flops(flops);
}

KeepData::KeepData() {
  ++rank_state().keep_data;
}
KeepData::~KeepData() {
  --rank_state().keep_data;
}

int ranks_per_process() {
#if defined(SUITE_SMPI)
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
#else
  return 1;
#endif
}

Attributes run_attrs() {
#if defined(SUITE_SMPI)
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);
  const double host_speed = parse_speed(simgrid::config::get_value<std::string>("smpi/host-speed"));
  const double platform_speed = sg_host_get_speed(sg_host_self());
  return {
      {"simulated", std::int64_t{1}},
      {"sim_platform", env_or("SUITE_SIM_PLATFORM", "unnamed (smpirun without simulate.py)")},
      {"sim_platform_detail", env_or("SUITE_SIM_PLATFORM_DETAIL", "")},
      {"sim_compute_mode", std::string(modeled() ? "modeled" : "executed")},
      {"sim_flops", modeled() ? modeled_flops() : NAN},
      {"sim_host_speed", modeled() ? NAN : host_speed},
      {"sim_platform_speed", platform_speed},
      {"sim_compute_scale", modeled() ? NAN : host_speed / platform_speed},
      {"sim_tensor_data",
       std::string(modeled() ? "placeholders: buffers of >= 1 MiB are SMPI shared memory, "
                               "values not held, bytes still sent"
                             : "real")},
      {"smpi_version", "SimGrid " + std::to_string(major) + "." + std::to_string(minor) + "." +
                           std::to_string(patch)},
      {"watchdog", std::string("off: SMPI build (its thread may not call MPI in the simulator)")},
  };
#else
  return {};
#endif
}

}  // namespace suite::sim

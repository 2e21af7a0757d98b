// Simulated clusters: the suite's benchmarks under SimGrid's SMPI (`make sim` builds them into
// build-sim/, scripts/envs/simulate.py runs them on a platform file). In that build every timer
// reads the simulated clock (RunClock = MPI_Wtime), the watchdog is off (its thread may not call
// MPI inside the simulator), and compute runs one of two ways, recorded in every results file:
//  - executed (default): kernels run on the host; SMPI times each burst of computation between
//    MPI calls and injects it into the simulated clock, scaled by smpi/host-speed over the
//    platform host's speed. Checks run.
//  - modeled (--sim-flops F): the FLOP-heavy kernels (attention forward and backward, GEMMs)
//    are skipped and their exact FLOPs injected at rate F; element-wise work, packing and the
//    host code between MPI calls take no simulated time (smpi/simulate-computation:no).
//    Checks are skipped and recorded as skipped; bytes and work counts stay exact because the
//    schedule that produces them still runs.
// Outside the SMPI build nothing here changes behaviour: modeled() is false, run_attrs() empty.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/device/device.hpp"
#include "common/results/results.hpp"
#include "kernels/core/dtype.hpp"

namespace CLI {
class App;
}
namespace suite::kernels {
class AttentionEngine;
}

namespace suite::sim {

#if defined(SUITE_SMPI)
inline constexpr bool kSmpiBuild = true;
#else
inline constexpr bool kSmpiBuild = false;
#endif

// Adds --sim-flops to the SMPI build's flags (nothing elsewhere); the value is this rank's
// (common/sim/rank_local.hpp).
void add_options(CLI::App& app);
// What --help says about simulation (empty outside the SMPI build).
std::string help_footer();
// After parsing, before any case: refuses what the SMPI build cannot run (GPU-only choices,
// --sim-flops without smpi/simulate-computation:no or executed compute with it). Throws
// UsageError naming the flag.
void validate(const std::string& backend, const std::string& transport, const std::string& dtype);

// --sim-flops given: kernels are skipped and their FLOPs injected.
bool modeled();
// F of modeled compute (FLOP/s), 0 when executed.
double modeled_flops();
// Advances this rank's simulated clock by flops / F (modeled compute; no-op otherwise).
void inject_flops(double flops);

// While one is alive, inject_flops adds up instead of advancing the clock, and the sum is
// injected once when the outermost one ends: one simulation event for a whole ring round of
// thousands of document blocks instead of one per block (the same simulated time: nothing
// between the blocks talks to the network).
class FlopBatch {
 public:
  FlopBatch();
  ~FlopBatch();
  FlopBatch(const FlopBatch&) = delete;
  FlopBatch& operator=(const FlopBatch&) = delete;
};

// Modeled compute reads no tensor values, so a rank holds none: in modeled mode the CPU device
// hands out placeholders for buffers of at least kPlaceholderMinBytes. A placeholder points into
// one SMPI shared region that all placeholders of all ranks overlap (SMPI_SHARED_MALLOC: it maps
// the same few physical pages, so memory stays flat however large the tensors); copies and fills
// into it are skipped, and SMPI sends it without copying the payload, so the simulated wire still
// carries every byte. Smaller buffers
// (positions, routing) stay real: the schedule reads them. Outside modeled mode: no placeholders.
inline constexpr std::size_t kPlaceholderMinBytes = std::size_t{1} << 20;
// A placeholder of `bytes` when modeled compute is on, bytes >= kPlaceholderMinBytes and no
// KeepData is alive; an empty Buffer otherwise (the caller allocates real memory).
Buffer alloc_placeholder(std::size_t bytes);
// True when p points into a placeholder (SMPI's shared memory).
bool is_placeholder(const void* p);
// Placeholders handed out and their bytes (what modeled mode did not allocate for real).
struct PlaceholderCounters {
  std::int64_t live_bytes = 0;
  std::int64_t allocations = 0;
};
PlaceholderCounters placeholder_counters();
// While one is alive on this rank, allocations are real even in modeled mode: for data the
// host computes on and reads back (e.g. routing decisions).
class KeepData {
 public:
  KeepData();
  ~KeepData();
  KeepData(const KeepData&) = delete;
  KeepData& operator=(const KeepData&) = delete;
};

// Ranks that share this process's memory: every simulated rank in the SMPI build (SMPI runs them
// all in one process), 1 elsewhere. Divides the host's free memory into per-rank shares.
int ranks_per_process();

// File attributes of a simulated run (simulated = 1, platform, compute mode, SMPI version...);
// empty outside the SMPI build.
Attributes run_attrs();

// Modeled compute: an attention engine that skips the kernels and injects 4 d a FLOPs per visible
// (query, key) pair forward and 10 d a backward (the counts the ring and Ulysses report), counted
// exactly from the positions. Outputs are left as they are.
std::unique_ptr<kernels::AttentionEngine> make_modeled_attention_engine(DType dtype);

}  // namespace suite::sim

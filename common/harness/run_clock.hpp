// The clock every CPU-side timer of the suite reads: steady_clock on a real machine, and in
// the SMPI build (SUITE_SMPI, `make sim`) MPI_Wtime, SMPI's simulated clock. Under SMPI all
// ranks run in one host process one after another, so host time would count every rank's
// work; only the simulated clock says how long a rank's step took on the simulated platform.
#pragma once

#include <chrono>

#if defined(SUITE_SMPI)
#include <mpi.h>
#include <simgrid/engine.h>
#endif

namespace suite {

#if defined(SUITE_SMPI)
namespace sim {
bool modeled();  // common/sim/sim.hpp
}

// A std::chrono clock over the simulated clock (seconds as a double). Executed compute reads
// MPI_Wtime, which first injects the host computation done since the last MPI call; modeled
// compute has none to inject and reads SimGrid's clock directly, without the two thread-CPU
// clock reads MPI_Wtime costs (millions of them at 1024 simulated ranks).
struct RunClock {
  using rep = double;
  using period = std::ratio<1>;
  using duration = std::chrono::duration<double>;
  using time_point = std::chrono::time_point<RunClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept {
    return time_point(duration(sim::modeled() ? simgrid_get_clock() : MPI_Wtime()));
  }
};
#else
using RunClock = std::chrono::steady_clock;
#endif

}  // namespace suite

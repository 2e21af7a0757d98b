// The clock every CPU-side timer of the suite reads: steady_clock on a real machine, and in
// the SMPI build (SUITE_SMPI, `make sim`) MPI_Wtime, SMPI's simulated clock. Under SMPI all
// ranks run in one host process one after another, so host time would count every rank's
// work; only the simulated clock says how long a rank's step took on the simulated platform.
#pragma once

#include <chrono>

#if defined(SUITE_SMPI)
#include <mpi.h>
#endif

namespace suite {

#if defined(SUITE_SMPI)
// A std::chrono clock over MPI_Wtime (seconds as a double). Read only between MPI_Init and
// MPI_Finalize; SMPI turns each reading into a simulation event that first injects the
// computation done since the last MPI call (executed mode).
struct RunClock {
  using rep = double;
  using period = std::ratio<1>;
  using duration = std::chrono::duration<double>;
  using time_point = std::chrono::time_point<RunClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point(duration(MPI_Wtime())); }
};
#else
using RunClock = std::chrono::steady_clock;
#endif

}  // namespace suite

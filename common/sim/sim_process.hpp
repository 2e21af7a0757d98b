// State that every simulated rank of an SMPI process shares. SMPI gives each rank its own copy
// of the executable's globals (and of libbenchmark's); this one lives in a shared library of its
// own (libsuite_sim_process.so, the SMPI build only), which every rank sees once.
#pragma once

#include <cstddef>

namespace suite::sim {

// The one region that modeled compute's placeholders point into (common/sim/sim.cpp), and its size.
struct PlaceholderRegion {
  void* base = nullptr;
  std::size_t bytes = 0;
};
PlaceholderRegion& process_placeholder_region();

}  // namespace suite::sim

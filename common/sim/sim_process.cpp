#include "common/sim/sim_process.hpp"

namespace suite::sim {

PlaceholderRegion& process_placeholder_region() {
  static PlaceholderRegion region;
  return region;
}

}  // namespace suite::sim

#include "common/sim/rank_local.hpp"

#if defined(SUITE_SMPI)
#include <simgrid/actor.h>
#endif

namespace suite::sim {

long current_actor() {
#if defined(SUITE_SMPI)
  return static_cast<long>(sg_actor_self_get_pid());
#else
  return 0;
#endif
}

}  // namespace suite::sim

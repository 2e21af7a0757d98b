// A variable of which each rank has its own value. A native run is one rank a process: one value.
// The SMPI build runs every simulated rank in one process and loads the suite's libraries once
// for all of them (only the executable and libbenchmark are copied per rank, so a rank does not
// cost a copy of the suite's code): there the value is kept per SimGrid actor.
#pragma once

#include <unordered_map>

namespace suite::sim {

// The calling simulated rank's SimGrid actor id in the SMPI build; 0 elsewhere.
long current_actor();

template <class T>
class RankLocal {
 public:
  T& get() {
#if defined(SUITE_SMPI)
    return values_[current_actor()];  // a node map: a value's address survives rehashing
#else
    return value_;
#endif
  }

 private:
#if defined(SUITE_SMPI)
  std::unordered_map<long, T> values_;
#else
  T value_{};
#endif
};

}  // namespace suite::sim

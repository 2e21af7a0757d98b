#include "common/harness/phase_timer.hpp"

#include <algorithm>

namespace suite {

IntervalTimer& PhaseTimer::next_timer() {
  if (used_ == pool_.size()) pool_.push_back(device_.make_timer());
  return *pool_[used_++];
}

void PhaseTimer::end_step(bool keep) {
  if (!keep) return;
  std::map<std::string, double> sums;
  for (auto& [name, timer] : pending_)
    sums[name] += timer->seconds();
  for (auto& [name, value] : sums) {
    auto it =
        std::find_if(series_.begin(), series_.end(), [&](auto& s) { return s.first == name; });
    if (it == series_.end()) {
      // A phase first seen late gets zeros for the steps before it, keeping rows aligned.
      series_.emplace_back(name, std::vector<double>(steps_, 0.0));
      it = series_.end() - 1;
    }
    it->second.push_back(value);
  }
  ++steps_;
  for (auto& s : series_)
    s.second.resize(steps_, 0.0);
}

}  // namespace suite

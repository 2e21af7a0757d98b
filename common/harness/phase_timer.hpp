// Times named parts of one step (e.g. reduce-scatter and all-gather) with the device's own
// clock, so per-phase figures sit beside the step time in the results.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/device/device.hpp"

namespace suite {

class PhaseTimer {
 public:
  explicit PhaseTimer(Device& device) : device_(device) {}

  // Runs f() as (part of) phase `name`; a phase timed several times in a step is summed.
  template <class F>
  void time(const std::string& name, F&& f) {
    IntervalTimer& t = next_timer();
    t.start();
    std::forward<F>(f)();
    t.stop();
    pending_.emplace_back(name, &t);
  }

  void begin_step() {
    pending_.clear();
    used_ = 0;
  }
  // Resolves this step's phases (waits for the device) and appends them to the series.
  void end_step(bool keep);

  // Phase name -> one value per kept step, in order of first appearance.
  const std::vector<std::pair<std::string, std::vector<double>>>& series() const { return series_; }

 private:
  IntervalTimer& next_timer();
  Device& device_;
  std::vector<std::unique_ptr<IntervalTimer>> pool_;
  std::size_t used_ = 0;
  std::vector<std::pair<std::string, IntervalTimer*>> pending_;
  std::vector<std::pair<std::string, std::vector<double>>> series_;
  std::size_t steps_ = 0;
};

}  // namespace suite

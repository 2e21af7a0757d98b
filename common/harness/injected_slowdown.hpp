// Test hook: SUITE_TEST_SLOWDOWN=F stretches every timed step to (1 + F) x its time, with a
// busy wait (real time, steady_clock) after the step and before its timer stops: a known
// slowdown, injected for real, whose detection `suite sensitivity --cpu` measures. Meant for CPU
// runs: a GPU step's host time is its launches only.
#pragma once

#include <chrono>
#include <cstdlib>

namespace suite {

using SlowdownClock = std::chrono::steady_clock;

// The fraction SUITE_TEST_SLOWDOWN names; 0 (no slowdown) when unset, not a number or not
// positive.
inline double injected_slowdown() {
  const char* value = std::getenv("SUITE_TEST_SLOWDOWN");
  if (!value) return 0.0;
  char* end = nullptr;
  const double fraction = std::strtod(value, &end);
  return end != value && *end == '\0' && fraction > 0 ? fraction : 0.0;
}

// When a step that ran from `begun` to `ended` ends once stretched by `fraction`.
inline SlowdownClock::time_point stretched_end(SlowdownClock::time_point begun,
                                               SlowdownClock::time_point ended, double fraction) {
  return ended + std::chrono::duration_cast<SlowdownClock::duration>((ended - begun) * fraction);
}

// Spins until `until`: a sleep would end late by the scheduler's wake-up delay.
inline void busy_wait_until(SlowdownClock::time_point until) {
  while (SlowdownClock::now() < until) {
  }
}

}  // namespace suite

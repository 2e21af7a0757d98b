// SUITE_TEST_SLOWDOWN (common/harness/injected_slowdown.hpp): the fraction it reads, the end of
// a stretched step, and a busy wait that lasts at least as long as asked.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "common/harness/injected_slowdown.hpp"

namespace suite {
namespace {

using std::chrono::milliseconds;

TEST(InjectedSlowdown, ReadsAPositiveFractionAndIgnoresTheRest) {
  ::unsetenv("SUITE_TEST_SLOWDOWN");
  EXPECT_EQ(injected_slowdown(), 0.0);
  const std::pair<const char*, double> cases[] = {{"0.5", 0.5},  {"0.02", 0.02}, {"0", 0.0},
                                                  {"-0.1", 0.0}, {"fast", 0.0},  {"0.1x", 0.0}};
  for (const auto& [text, expected] : cases) {
    ::setenv("SUITE_TEST_SLOWDOWN", text, 1);
    EXPECT_EQ(injected_slowdown(), expected) << text;
  }
  ::unsetenv("SUITE_TEST_SLOWDOWN");
}

TEST(InjectedSlowdown, StretchedStepLastsOnePlusTheFractionTimesAsLong) {
  const SlowdownClock::time_point begun{milliseconds(1000)};
  const auto ended = begun + milliseconds(200);
  // 200 ms stretched by half: 100 ms more, 300 ms in all.
  EXPECT_EQ(stretched_end(begun, ended, 0.5), begun + milliseconds(300));
  EXPECT_EQ(stretched_end(begun, ended, 0.05), begun + milliseconds(210));
  EXPECT_EQ(stretched_end(begun, ended, 0.0), ended);
}

TEST(InjectedSlowdown, BusyWaitEndsNoEarlierThanAsked) {
  const auto start = SlowdownClock::now();
  busy_wait_until(start + milliseconds(20));
  EXPECT_GE(SlowdownClock::now() - start, milliseconds(20));
}

}  // namespace
}  // namespace suite

// The factors of a ring pass's efficiency against the ideal, on figures worked by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/ring_attention/ring_efficiency.hpp"

namespace suite::ring {
namespace {

TEST(EfficiencyFactors, SplitTheEfficiencyIntoBalanceRateAndExchange) {
  // 4 ranks, 100 pairs each on average, 125 on the busiest; the ideal computes all 400 in 2 s
  // (200 pairs/s); the busiest rank's 125 take 0.8 s without transfers (156.25 pairs/s) and
  // the step 1 s with them. Efficiency: 2 s / 4 / 1 s = 0.5.
  const EfficiencyFactors e = efficiency_factors(100, 125, 4, 2.0, 0.8, 1.0);
  EXPECT_DOUBLE_EQ(e.balance, 0.8);
  EXPECT_DOUBLE_EQ(e.pair_rate, 0.78125);
  EXPECT_DOUBLE_EQ(e.exchange, 0.8);
  EXPECT_DOUBLE_EQ(e.efficiency(), 0.5);
}

TEST(EfficiencyFactors, BalancedLayoutAtTheIdealsRateReachesOne) {
  // 8 ranks of 50 pairs; the ideal does 400 pairs in 4 s; each rank 50 in 0.5 s, no exchange
  // cost.
  const EfficiencyFactors e = efficiency_factors(50, 50, 8, 4.0, 0.5, 0.5);
  EXPECT_DOUBLE_EQ(e.balance, 1.0);
  EXPECT_DOUBLE_EQ(e.pair_rate, 1.0);
  EXPECT_DOUBLE_EQ(e.efficiency(), 1.0);
}

TEST(EfficiencyFactors, NanWithoutWorkOrTime) {
  EXPECT_TRUE(std::isnan(efficiency_factors(0, 0, 4, 1.0, 1.0, 1.0).balance));
  EXPECT_TRUE(std::isnan(efficiency_factors(1, 2, 4, 0.0, 1.0, 1.0).pair_rate));
  EXPECT_TRUE(std::isnan(efficiency_factors(1, 2, 4, 1.0, 1.0, 0.0).exchange));
}

}  // namespace
}  // namespace suite::ring

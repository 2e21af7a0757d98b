#include <gtest/gtest.h>

#include "common/harness/stats.hpp"

TEST(Stats, PercentilesInterpolate) {
  std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(suite::percentile(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(suite::percentile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(suite::percentile(v, 1.0), 5);
  EXPECT_DOUBLE_EQ(suite::percentile(v, 0.1), 1.4);
  EXPECT_DOUBLE_EQ(suite::percentile({1, 2}, 0.5), 1.5);
  auto s = suite::summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
}

// The collective checks demand exact equality: every reduction order must stay exact in bf16.
#include <gtest/gtest.h>

#include "common/transport/exact_pattern.hpp"
#include "kernels/core/bf16.hpp"

namespace {

// Accumulates the ranks' values in the given order, rounding every partial sum to bf16 the
// way a ring reduction running in bf16 does.
double bf16_ring_sum(const suite::ExactSumPattern& p, std::size_t i, int ranks, bool reverse) {
  float acc = 0;
  for (int k = 0; k < ranks; ++k) {
    int r = reverse ? ranks - 1 - k : k;
    acc = suite::to_float(suite::to_bf16(acc + static_cast<float>(p.value(r, i))));
  }
  return acc;
}

}  // namespace

TEST(ExactSumPattern, EveryOrderIsExactInBf16UpToThousandsOfRanks) {
  for (int ranks : {1, 2, 3, 4, 85, 86, 172, 256, 1000, 4096}) {
    suite::ExactSumPattern p(ranks);
    for (std::size_t i = 0; i < 600; ++i) {
      double exact = 0;
      for (int r = 0; r < ranks; ++r) {
        double v = p.value(r, i);
        ASSERT_TRUE(v == 0 || v == 1 || v == 2 || v == 3);
        exact += v;
      }
      ASSERT_LE(exact, 255) << "ranks " << ranks << " element " << i;
      ASSERT_EQ(p.sum(i), exact) << "ranks " << ranks << " element " << i;
      ASSERT_EQ(bf16_ring_sum(p, i, ranks, false), exact) << "ranks " << ranks << " element " << i;
      ASSERT_EQ(bf16_ring_sum(p, i, ranks, true), exact) << "ranks " << ranks << " element " << i;
    }
  }
}

TEST(ExactSumPattern, RanksDifferSoAWrongBlockIsCaught) {
  suite::ExactSumPattern p(4);
  int differing = 0;
  for (std::size_t i = 0; i < 16; ++i)
    differing += p.value(0, i) != p.value(1, i);
  EXPECT_GT(differing, 8);
  // Sums vary along the buffer, so a shifted block does not match: for shifts of a power of
  // two (typical shard sizes) most elements differ.
  for (std::size_t shift : {1u, 256u, 1024u, 65536u}) {
    int same = 0;
    for (std::size_t i = 0; i < 1000; ++i)
      same += p.sum(i) == p.sum(i + shift);
    EXPECT_LT(same, 400) << "shift " << shift;
  }
}

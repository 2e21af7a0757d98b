// Ring layouts and block-pair masks against brute force over global positions: the mask hint a
// vendor kernel trusts must describe exactly the pairs the positions make visible.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <tuple>

#include "bench/layouts/ring_layout.hpp"
#include "common/harness/errors.hpp"
#include "tests/unit/segment_pairs.hpp"

namespace suite::ring {
namespace {

using kernels::BlockMask;

bool visible_by_mask(BlockMask m, std::int64_t i, std::int64_t j, std::int64_t cq,
                     std::int64_t ck) {
  switch (m) {
    case BlockMask::full:
      return true;
    case BlockMask::causal_top_left:
      return j <= i;
    case BlockMask::causal_bottom_right:
      return j <= i + (ck - cq);
    case BlockMask::positions:
      return false;  // not used: only the positions say
  }
  return false;
}

class RingLayoutTest : public ::testing::TestWithParam<std::tuple<Layout, int, std::int64_t>> {};

TEST_P(RingLayoutTest, EveryTokenOnExactlyOneRank) {
  auto [layout, n_c, c] = GetParam();
  std::set<std::int64_t> seen;
  for (int r = 0; r < n_c; ++r)
    for (auto p : rank_positions(layout, r, n_c, c)) {
      EXPECT_TRUE(seen.insert(p).second) << "position " << p << " twice";
      EXPECT_GE(p, 0);
      EXPECT_LT(p, c * n_c);
    }
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), c * n_c);
}

TEST_P(RingLayoutTest, MaskHintsAndPairCountsMatchPositions) {
  auto [layout, n_c, c] = GetParam();
  for_each_segment_pair(
      layout, n_c, c,
      [&, layout = layout](bool causal, int r, int src, const Segment& q, const Segment& k) {
        const std::int64_t brute = brute_force_pairs(
            q, k, [&](std::int64_t qp, std::int64_t kp) { return !causal || kp <= qp; });
        EXPECT_EQ(visible_pairs(q, k, causal), brute);
        auto mask = classify_pair(q, k, causal);
        if (!mask) {
          EXPECT_EQ(brute, 0) << "a pair with visible keys was classified as empty";
          return;
        }
        if (*mask == BlockMask::positions) return;
        // Modeled compute counts a structured block from its shape alone.
        EXPECT_EQ(kernels::structured_visible_pairs(*mask, q.count, k.count), brute);
        for (std::int64_t i = 0; i < q.count; ++i)
          for (std::int64_t j = 0; j < k.count; ++j)
            ASSERT_EQ(visible_by_mask(*mask, i, j, q.count, k.count),
                      !causal || k.position(j) <= q.position(i))
                << layout_name(layout) << " rank " << r << " src " << src << " mask "
                << block_mask_name(*mask) << " i " << i << " j " << j;
      });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RingLayoutTest,
    ::testing::Combine(::testing::Values(Layout::contiguous, Layout::zigzag, Layout::striped),
                       ::testing::Values(1, 2, 3, 4), ::testing::Values<std::int64_t>(2, 6, 16)));

TEST(RingLayout, StructuredPairCountsMatchTheMaskForAnyShape) {
  // Top-left and bottom-right masks of every small shape, wider and taller than square (the
  // all-gather variant's queries see a bottom-right prefix of all keys), against brute force.
  for (BlockMask m : {BlockMask::full, BlockMask::causal_top_left, BlockMask::causal_bottom_right})
    for (std::int64_t cq = 0; cq <= 9; ++cq)
      for (std::int64_t ck = 0; ck <= 9; ++ck) {
        std::int64_t brute = 0;
        for (std::int64_t i = 0; i < cq; ++i)
          for (std::int64_t j = 0; j < ck; ++j)
            brute += visible_by_mask(m, i, j, cq, ck);
        EXPECT_EQ(kernels::structured_visible_pairs(m, cq, ck), brute)
            << block_mask_name(m) << " " << cq << "x" << ck;
      }
  EXPECT_THROW(kernels::structured_visible_pairs(BlockMask::positions, 4, 4),
               std::invalid_argument);
}

TEST(RingLayout, ZigzagBalancesCausalWork) {
  // Every rank does the same work over the ring: chunks r and 2N-1-r pair up.
  const int n_c = 4;
  const std::int64_t c = 8;
  std::set<std::int64_t> totals;
  for (int r = 0; r < n_c; ++r) {
    std::int64_t total = 0;
    for (int src = 0; src < n_c; ++src)
      for (const Segment& q : rank_segments(Layout::zigzag, r, n_c, c))
        for (const Segment& k : rank_segments(Layout::zigzag, src, n_c, c))
          total += visible_pairs(q, k, true);
    totals.insert(total);
  }
  EXPECT_EQ(totals.size(), 1u);
}

TEST(RingLayout, StripedOffDiagonalNeedsPositions) {
  // Rank 0's queries against rank 1's keys (striped): strictly-lower, no vendor mask fits.
  auto q = rank_segments(Layout::striped, 0, 2, 4)[0];
  auto k = rank_segments(Layout::striped, 1, 2, 4)[0];
  EXPECT_EQ(classify_pair(q, k, true), BlockMask::positions);
  EXPECT_EQ(classify_pair(k, q, true), BlockMask::causal_top_left);
}

TEST(RingLayout, RejectsOddZigzagBlocks) {
  EXPECT_THROW(validate_layout(Layout::zigzag, 3, 2), UsageError);
  EXPECT_THROW(validate_layout(Layout::contiguous, 0, 2), UsageError);
  EXPECT_NO_THROW(validate_layout(Layout::striped, 3, 4));
}

TEST(RingLayout, SourceRankGoesBackwardsAroundTheRing) {
  EXPECT_EQ(ring_source(0, 1, 4), 3);
  EXPECT_EQ(ring_source(2, 2, 4), 0);
  EXPECT_EQ(ring_source(3, 0, 4), 3);
}

}  // namespace
}  // namespace suite::ring

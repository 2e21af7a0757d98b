// The micro-batch pipeline's schedule (bench/moe/moe_microbatch.hpp) replayed on hand-picked
// piece times, against critical paths worked out by hand; and METHODS.md section 4's bound and
// crossing d_ff*.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "bench/moe/moe_microbatch.hpp"
#include "common/formulas/model.hpp"

namespace suite::moe {
namespace {

std::map<std::string, double> pieces(int m, double route, double a2a, double expert) {
  std::map<std::string, double> s;
  for (int i = 0; i < m; ++i) {
    const std::string n = "#" + std::to_string(i);
    s["route" + n] = route;
    s["dispatch" + n] = s["combine" + n] = s["bwd_combine" + n] = s["bwd_dispatch" + n] = a2a;
    s["expert" + n] = s["bwd_expert" + n] = expert;
  }
  return s;
}

TEST(MoeMicrobatch, OneMicroBatchIsTheSumOfItsPieces) {
  EXPECT_DOUBLE_EQ(critical_path(1, false, pieces(1, 1, 2, 3)), 1 + 2 + 3 + 2);
  EXPECT_DOUBLE_EQ(critical_path(1, true, pieces(1, 1, 2, 3)), 2 + 3 + 2);
}

TEST(MoeMicrobatch, TwoMicroBatchesOverlapByHand) {
  // Routes end at 2; d0 2..4, d1 4..6; e0 4..7; c0 7..9; e1 7..10; c1 10..12.
  EXPECT_DOUBLE_EQ(critical_path(2, false, pieces(2, 1, 2, 3)), 12);
  // Backward: b0 0..2, b1 2..4; e0 2..5; g0 5..7; e1 5..8; g1 8..10.
  EXPECT_DOUBLE_EQ(critical_path(2, true, pieces(2, 0, 2, 3)), 10);
  // Network-bound: d0 0..5, d1 5..10, e0 5..6, c0 10..15 (after d1), e1 10..11, c1 15..20.
  EXPECT_DOUBLE_EQ(critical_path(2, false, pieces(2, 0, 5, 1)), 20);
}

TEST(MoeMicrobatch, BlockingExchangesAddUp) {
  // Each exchange waited for as it starts: routes 2, then 2 + 3 + 2 per micro-batch.
  EXPECT_DOUBLE_EQ(critical_path(2, false, pieces(2, 1, 2, 3), false), 2 + 2 * (2 + 3 + 2));
}

TEST(MoeMicrobatch, BoundAndCrossing) {
  EXPECT_DOUBLE_EQ(model::moe_overlap_step(8, 6, 2), 8 + 3);
  EXPECT_DOUBLE_EQ(model::moe_overlap_step(2, 6, 4), 6 + 0.5);
  EXPECT_DOUBLE_EQ(model::moe_overlap_dff_star(1e12, 1e9, 8, 2, false), 875);
  EXPECT_NEAR(model::moe_overlap_dff_star(1e12, 1e9, 8, 2, true), 875 / 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(model::moe_overlap_dff_star(1e12, 1e9, 8, 4, false), 1750);
}

}  // namespace
}  // namespace suite::moe

// MoE kernels on the CPU: the shared index/ordering helpers, the router, the capacity/drop
// rule, the dispatch and regroup plans, the row permutation and the combine, against
// hand-worked cases and independent recomputation; SwiGLU's silu * mul against its formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/moe/moe_cpu.hpp"
#include "kernels/moe/moe_index.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels::moe {
namespace {

TEST(MoeIndex, TopkInsertKeepsTheBestInOrderWithTiesByIndex) {
  float score[3];
  int expert[3];
  int n = 0;
  const float s[] = {0.1f, 0.5f, 0.3f, 0.5f, 0.05f, 0.7f};
  for (int e = 0; e < 6; ++e)
    topk_insert(s[e], e, 3, n, score, expert);
  ASSERT_EQ(n, 3);
  EXPECT_EQ(expert[0], 5);
  EXPECT_EQ(expert[1], 1);  // 0.5 tie: expert 1 before expert 3
  EXPECT_EQ(expert[2], 3);
  EXPECT_TRUE(score_before(0.5f, 1, 0.5f, 3));
  EXPECT_FALSE(score_before(0.5f, 3, 0.5f, 1));
}

TEST(MoeIndex, OwnersAndCopyIndex) {
  EXPECT_EQ(expert_owner(5, 4), 1);
  EXPECT_EQ(local_expert(5, 4), 1);
  EXPECT_EQ(expert_owner(3, 4), 0);
  EXPECT_EQ(copy_index(3, 1, 2), 7);
  EXPECT_TRUE(copy_kept_before(0.9f, 5, 0.5f, 0));
  EXPECT_TRUE(copy_kept_before(0.5f, 0, 0.5f, 5));
}

TEST(MoeCapacity, CeilingOfCfKNOverE) {
  EXPECT_EQ(expert_capacity(0, 2, 64, 4), -1);
  EXPECT_EQ(expert_capacity(1.0, 2, 64, 4), 32);
  EXPECT_EQ(expert_capacity(1.25, 2, 64, 4), 40);
  EXPECT_EQ(expert_capacity(1.1, 1, 10, 4), 3);  // 2.75 -> 3
  EXPECT_EQ(expert_capacity(0.01, 1, 10, 4), 1);
}

TEST(MoeCapacity, DropsLowestGatesFirstTiesByCopyIndex) {
  // Expert 0 gets copies 0, 1, 2, 4 with gates .5 .9 .5 .2; expert 1 gets copy 3.
  const std::int32_t chosen[] = {0, 0, 0, 1, 0};
  const float gates[] = {0.5f, 0.9f, 0.5f, 0.1f, 0.2f};
  std::uint8_t keep[5];
  capacity_keep(5, chosen, gates, 2, 2, keep);
  EXPECT_EQ(std::vector<int>(keep, keep + 5), (std::vector<int>{1, 1, 0, 1, 0}));
  capacity_keep(5, chosen, gates, 2, -1, keep);
  EXPECT_EQ(std::vector<int>(keep, keep + 5), (std::vector<int>{1, 1, 1, 1, 1}));
  capacity_keep(5, chosen, gates, 2, 0, keep);
  EXPECT_EQ(std::vector<int>(keep, keep + 5), (std::vector<int>{0, 0, 0, 0, 0}));
}

TEST(MoeCapacity, KeptCountIsMinOfLoadAndCapacityPerExpert) {
  const int E = 5, copies = 997;
  std::vector<std::int32_t> chosen(copies);
  std::vector<float> gates = test::random_vector<float>(copies, 4, 0, 1);
  for (int i = 0; i < copies; ++i)
    chosen[i] = (i * 7 + i / 3) % E == 4 ? 4 : (i * i) % 3;  // expert 3 unused
  std::vector<std::uint8_t> keep(copies);
  for (std::int64_t cap : {0, 1, 50, 300, 2000}) {
    capacity_keep(copies, chosen.data(), gates.data(), E, cap, keep.data());
    for (int e = 0; e < E; ++e) {
      int load = 0, kept = 0;
      float lowest_kept = 2, highest_dropped = -1;
      for (int i = 0; i < copies; ++i) {
        if (chosen[i] != e) continue;
        ++load;
        kept += keep[i];
        if (keep[i]) lowest_kept = std::min(lowest_kept, gates[i]);
        if (!keep[i]) highest_dropped = std::max(highest_dropped, gates[i]);
      }
      EXPECT_EQ(kept, std::min<std::int64_t>(load, cap)) << "expert " << e << " cap " << cap;
      EXPECT_LE(highest_dropped, lowest_kept) << "a higher gate was dropped";
    }
  }
}

TEST(MoeRouter, SoftmaxTopkRenormalised) {
  const int T = 50, E = 7, k = 3;
  auto logits = test::random_vector<double>(T * E, 11, -3, 3);
  std::vector<float> bias = {0, 0.5f, 0, 0, -0.5f, 0, 0};
  std::vector<std::int32_t> chosen(T * k);
  std::vector<float> gates(T * k);
  std::vector<double> prob_sum(E, 0.0);
  cpu::router_topk<double>(T, E, k, logits.data(), bias.data(), nullptr, chosen.data(),
                           gates.data(), prob_sum.data());
  EXPECT_NEAR(std::accumulate(prob_sum.begin(), prob_sum.end(), 0.0), T, 1e-9);
  for (int t = 0; t < T; ++t) {
    std::vector<double> p(E);
    double z = 0;
    for (int e = 0; e < E; ++e)
      z += p[e] = std::exp(logits[t * E + e] + bias[e]);
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    double chosen_sum = 0, gate_sum = 0;
    for (int s = 0; s < k; ++s) {
      EXPECT_EQ(chosen[t * k + s], order[s]) << "token " << t;
      chosen_sum += p[order[s]];
    }
    for (int s = 0; s < k; ++s) {
      EXPECT_NEAR(gates[t * k + s], p[order[s]] / chosen_sum, 1e-6);
      gate_sum += gates[t * k + s];
    }
    EXPECT_NEAR(gate_sum, 1, 1e-6);
  }
}

TEST(MoeRouter, SelectBiasChangesTheChoiceNotTheGateFormula) {
  const double logits[] = {2.0, 1.0, 0.0};  // expert 0 best without bias
  const float none[] = {0, 0, 0}, push[] = {-1.0f, 0, 0};
  std::int32_t chosen;
  float gate;
  std::vector<double> sums(3, 0.0);
  cpu::router_topk<double>(1, 3, 1, logits, none, push, &chosen, &gate, sums.data());
  EXPECT_EQ(chosen, 1);
  EXPECT_FLOAT_EQ(gate, 1.0f);  // k = 1: the renormalised gate is 1
  EXPECT_THROW(
      cpu::router_topk<double>(1, 3, 4, logits, none, nullptr, &chosen, &gate, sums.data()),
      std::invalid_argument);
}

TEST(MoePlan, DispatchOrderCountsAndDrops) {
  // 3 tokens, k = 2, 4 experts on 2 ranks (2 each).
  const std::int32_t chosen[] = {3, 0, 1, 3, 0, 2};
  const std::uint8_t keep[] = {1, 1, 1, 0, 1, 1};
  DispatchPlan p = plan_dispatch(3, 2, 4, 2, chosen, keep);
  EXPECT_EQ(p.send_counts, (std::vector<std::int64_t>{2, 1, 1, 1}));
  // Rows: expert 0 (tokens 0, 2), expert 1 (token 1), expert 2 (token 2), expert 3 (token 0).
  EXPECT_EQ(p.send_src, (std::vector<std::int64_t>{0, 2, 1, 2, 0}));
  EXPECT_EQ(p.slot_pos, (std::vector<std::int64_t>{4, 0, 2, -1, 1, 3}));
  EXPECT_THROW(plan_dispatch(3, 2, 3, 2, chosen, keep), std::invalid_argument);
}

TEST(MoePlan, RegroupIsExpertMajorAndScatterIsItsInverse) {
  // 3 source ranks, 2 local experts; a zero-size block from rank 1.
  const std::int64_t counts[] = {2, 1, 0, 3, 1, 1};
  RegroupPlan p = plan_regroup(3, 2, counts);
  EXPECT_EQ(p.expert_rows, (std::vector<std::int64_t>{3, 5}));
  // Received rows: r0e0 {0,1}, r0e1 {2}, r1e1 {3,4,5}, r2e0 {6}, r2e1 {7}.
  EXPECT_EQ(p.gather, (std::vector<std::int64_t>{0, 1, 6, 2, 3, 4, 5, 7}));
  for (std::size_t i = 0; i < p.gather.size(); ++i)
    EXPECT_EQ(p.scatter[p.gather[i]], static_cast<std::int64_t>(i));
  const std::int64_t none[] = {0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(plan_regroup(3, 2, none).gather.empty());
}

TEST(MoeRows, GatherAndCombine) {
  const std::int64_t cols = 3;
  const std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::int64_t src[] = {2, 0};
  std::vector<float> out(6);
  cpu::gather_rows<float>(2, cols, src, in.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{7, 8, 9, 1, 2, 3}));
  // Token 0: 0.25 * row 2 + 0.75 * row 0; token 1: all copies dropped -> zeros.
  const std::int64_t slot_pos[] = {2, 0, -1, -1};
  const float gates[] = {0.25f, 0.75f, 0.5f, 0.5f};
  std::vector<float> y(6, -1.0f);
  cpu::combine<float>(2, 2, cols, slot_pos, gates, in.data(), y.data());
  EXPECT_FLOAT_EQ(y[0], 0.25f * 7 + 0.75f * 1);
  EXPECT_FLOAT_EQ(y[2], 0.25f * 9 + 0.75f * 3);
  EXPECT_EQ(std::vector<float>(y.begin() + 3, y.end()), (std::vector<float>{0, 0, 0}));
}

TEST(Tokenwise, SiluMulIsSwiGlu) {
  const std::int64_t rows = 3, cols = 4;
  auto x = test::random_vector<double>(rows * 2 * cols, 9, -4, 4);
  std::vector<double> y(rows * cols);
  kernels::cpu::silu_mul_forward<double>(rows, cols, x.data(), y.data());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double a = x[r * 2 * cols + c], b = x[r * 2 * cols + cols + c];
      EXPECT_NEAR(y[r * cols + c], a / (1 + std::exp(-a)) * b, 1e-12);
    }
}

}  // namespace
}  // namespace suite::kernels::moe

// MoE kernels on the CPU: the shared index/ordering helpers, the router, the capacity/drop
// rule, the dispatch and regroup plans, the row permutation and the combine, against
// hand-worked cases and independent recomputation; SwiGLU's silu * mul against its formula;
// the backward ops against central finite differences of the forward ones (fp64) and the
// combine's adjoint identity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "kernels/moe/moe_cpu.hpp"
#include "kernels/moe/moe_grad.hpp"
#include "kernels/moe/moe_index.hpp"
#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/silu.hpp"
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
  for (std::int64_t c = 0; c < 12; ++c)
    EXPECT_EQ(copy_index(copy_token(c, 3), static_cast<int>(c % 3), 3), c);
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

// Node-limited routing against a brute force written here: the M groups of highest
// top-(k/M) score sums (ties: lower group), then the top-k among their experts.
TEST(MoeRouter, NodeLimitedAgainstBruteForce) {
  const int T = 200, E = 16, groups = 4;
  for (int k : {2, 4, 6})
    for (int M : {1, 2, 3}) {
      if (M * E / groups < k) continue;
      const GroupLimit limit{groups, M, std::max(1, k / M)};
      auto logits = test::random_vector<double>(T * E, 7 + k * 10 + M, -3, 3);
      std::vector<float> bias(E, 0.0f), select(E, 0.0f);
      select[3] = 0.05f;
      std::vector<std::int32_t> chosen(T * k);
      std::vector<float> gates(T * k);
      std::vector<double> sums(E, 0.0);
      cpu::router_topk<double>(T, E, k, logits.data(), bias.data(), select.data(), chosen.data(),
                               gates.data(), sums.data(), limit);
      for (int t = 0; t < T; ++t) {
        std::vector<double> p(E), score(E);
        double z = 0;
        for (int e = 0; e < E; ++e)
          z += p[e] = std::exp(logits[t * E + e]);
        for (int e = 0; e < E; ++e)
          score[e] = p[e] / z + select[e];
        std::vector<double> group_sum(groups);
        for (int g = 0; g < groups; ++g) {
          std::vector<double> in(score.begin() + g * 4, score.begin() + (g + 1) * 4);
          std::sort(in.rbegin(), in.rend());
          group_sum[g] = std::accumulate(in.begin(), in.begin() + limit.per_group, 0.0);
        }
        std::vector<int> order(groups);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return group_sum[a] > group_sum[b]; });
        std::vector<int> allowed;
        for (int e = 0; e < E; ++e)
          if (std::find(order.begin(), order.begin() + M, e / 4) != order.begin() + M)
            allowed.push_back(e);
        std::stable_sort(allowed.begin(), allowed.end(),
                         [&](int a, int b) { return score[a] > score[b]; });
        std::set<int> nodes;
        for (int s = 0; s < k; ++s) {
          ASSERT_EQ(chosen[t * k + s], allowed[s]) << "k " << k << " M " << M << " token " << t;
          nodes.insert(chosen[t * k + s] / 4);
        }
        EXPECT_LE(static_cast<int>(nodes.size()), M);
      }
    }
  // A limit that leaves fewer than k experts is refused.
  std::vector<double> logits(16, 0.0);
  std::vector<float> bias(16, 0.0f), gates(8);
  std::vector<std::int32_t> chosen(8);
  std::vector<double> sums(16, 0.0);
  EXPECT_THROW(cpu::router_topk<double>(1, 16, 8, logits.data(), bias.data(), nullptr,
                                        chosen.data(), gates.data(), sums.data(), {4, 1, 8}),
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

TEST(MoeRows, CombineWithoutGatesSumsTheKeptCopies) {
  const std::vector<double> back = {1, 2, 3, 4, 5, 6};  // 3 rows of 2
  const std::int64_t slot_pos[] = {2, 0, -1, 1};
  std::vector<double> y(4);
  cpu::combine<double>(2, 2, 2, slot_pos, nullptr, back.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{6, 8, 3, 4}));
}

// Central difference of f at x along one coordinate.
template <class F>
double central(F&& f, double x, double eps = 1e-6) {
  return (f(x + eps) - f(x - eps)) / (2 * eps);
}

TEST(MoeGrad, ActivationDerivativesMatchFiniteDifferences) {
  for (double x : {-6.0, -2.5, -0.7, 0.0, 0.3, 1.9, 5.0}) {
    EXPECT_NEAR(silu_grad(x), central([](double a) { return kernels::silu(a); }, x), 1e-8) << x;
    EXPECT_NEAR(gelu_tanh_grad(x), central([](double a) { return kernels::gelu_tanh(a); }, x), 1e-8)
        << x;
  }
}

TEST(MoeGrad, SwigluAndGeluBackwardAreTheDirectionalDerivative) {
  const std::int64_t rows = 5, cols = 7;
  auto x = test::random_vector<double>(rows * 2 * cols, 21, -3, 3);
  auto dy = test::random_vector<double>(rows * cols, 22);
  auto v = test::random_vector<double>(rows * 2 * cols, 23);
  // L(x) = <dy, f(x)>; dL/dx . v against (L(x + eps v) - L(x - eps v)) / 2 eps.
  auto loss = [&](bool swiglu, double eps) {
    std::vector<double> xe(x.size()), y(swiglu ? rows * cols : x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      xe[i] = x[i] + eps * v[i];
    if (swiglu)
      kernels::cpu::silu_mul_forward<double>(rows, cols, xe.data(), y.data());
    else
      kernels::cpu::gelu_forward<double>(static_cast<std::int64_t>(x.size()), xe.data(), y.data());
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      l += (swiglu ? dy[i] : dy[i % dy.size()]) * y[i];
    return l;
  };
  for (bool swiglu : {true, false}) {
    std::vector<double> dx(x.size()), dyy(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      dyy[i] = dy[i % dy.size()];
    if (swiglu)
      cpu::swiglu_backward<double>(rows, cols, x.data(), dy.data(), dx.data());
    else
      kernels::cpu::gelu_backward<double>(static_cast<std::int64_t>(x.size()), x.data(), dyy.data(),
                                          dx.data());
    double directional = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      directional += dx[i] * v[i];
    const double eps = 1e-5, fd = (loss(swiglu, eps) - loss(swiglu, -eps)) / (2 * eps);
    EXPECT_NEAR(directional, fd, 1e-7 * std::max(1.0, std::fabs(fd))) << "swiglu " << swiglu;
  }
}

TEST(MoeGrad, CombineBackwardIsTheAdjointAndDropsCarryNothing) {
  const std::int64_t tokens = 6, cols = 5, rows = 9;
  const int k = 2;
  // Copies of tokens 1 (slot 0) and 4 (both slots) dropped; the 9 kept copies fill the rows.
  const std::int64_t slot_pos[] = {3, 0, -1, 7, 1, 8, 2, 5, -1, -1, 4, 6};
  auto gates = test::random_vector<float>(tokens * k, 31, 0.1, 0.9);
  auto back = test::random_vector<double>(rows * cols, 32);
  auto dy = test::random_vector<double>(tokens * cols, 33);
  std::vector<double> out(tokens * cols), grad_back(rows * cols, NAN);
  std::vector<float> gate_grad(tokens * k, NAN);
  cpu::combine<double>(tokens, k, cols, slot_pos, gates.data(), back.data(), out.data());
  cpu::combine_backward<double>(tokens, k, cols, slot_pos, gates.data(), dy.data(), back.data(),
                                grad_back.data(), gate_grad.data());
  // out is linear in back and in the gates: <dY, out> = <grad_back, back> = sum_c g_c dg_c.
  double l = 0, adjoint = 0, gated = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    l += dy[i] * out[i];
  for (std::size_t i = 0; i < back.size(); ++i)
    adjoint += grad_back[i] * back[i];
  for (int c = 0; c < tokens * k; ++c)
    gated += static_cast<double>(gates[c]) * gate_grad[c];
  EXPECT_NEAR(adjoint, l, 1e-12);
  EXPECT_NEAR(gated, l, 1e-5);  // gate gradients are stored in fp32
  for (int c : {2, 8, 9})
    EXPECT_EQ(gate_grad[c], 0.0f) << "dropped copy " << c;
  // A kept copy's row is its gate times its token's output gradient.
  for (std::int64_t j = 0; j < cols; ++j)
    EXPECT_DOUBLE_EQ(grad_back[7 * cols + j], static_cast<double>(gates[3]) * dy[1 * cols + j]);
}

TEST(MoeGrad, RouterBackwardIsTheDirectionalDerivativeWithTheChoiceHeld) {
  const std::int64_t T = 7;
  const int E = 6, k = 3;
  auto z = test::random_vector<double>(T * E, 41, -2, 2);
  const std::vector<float> bias = {0, 0.3f, -0.2f, 0, 0.5f, 0};
  std::vector<std::int32_t> chosen(T * k);
  std::vector<float> gates(T * k);
  std::vector<double> sums(E, 0.0);
  cpu::router_topk<double>(T, E, k, z.data(), bias.data(), nullptr, chosen.data(), gates.data(),
                           sums.data());
  auto dgate = test::random_vector<float>(T * k, 42);
  auto prob_grad = test::random_vector<float>(E, 43, 0, 0.1);
  auto v = test::random_vector<double>(T * E, 44);
  // L(z) = sum_c dg_c g_c(z) + sum_t,e prob_grad_e p_te(z), the choice `chosen` held fixed.
  auto loss = [&](double eps) {
    double l = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> p(E);
      double sum = 0, chosen_sum = 0;
      for (int e = 0; e < E; ++e)
        sum += p[e] = std::exp(z[t * E + e] + eps * v[t * E + e] + bias[e]);
      for (int e = 0; e < E; ++e)
        l += prob_grad[e] * (p[e] /= sum);
      for (int s = 0; s < k; ++s)
        chosen_sum += p[chosen[t * k + s]];
      for (int s = 0; s < k; ++s)
        l += dgate[t * k + s] * p[chosen[t * k + s]] / chosen_sum;
    }
    return l;
  };
  std::vector<double> dz(T * E);
  cpu::router_backward<double>(T, E, k, z.data(), bias.data(), chosen.data(), dgate.data(),
                               prob_grad.data(), dz.data());
  double directional = 0;
  for (std::size_t i = 0; i < dz.size(); ++i)
    directional += dz[i] * v[i];
  const double eps = 1e-6;
  EXPECT_NEAR(directional, (loss(eps) - loss(-eps)) / (2 * eps), 1e-8);
  // Softmax backward: each token's logit gradients sum to zero.
  for (std::int64_t t = 0; t < T; ++t) {
    double row = 0;
    for (int e = 0; e < E; ++e)
      row += dz[t * E + e];
    EXPECT_NEAR(row, 0, 1e-12) << "token " << t;
  }
}

}  // namespace
}  // namespace suite::kernels::moe

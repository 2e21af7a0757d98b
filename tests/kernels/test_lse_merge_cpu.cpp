// LSE merge: random splits of the key set, merged in random orders, equal one-shot attention;
// empty partials are neutral; the merge is exactly commutative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/lse_merge.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

struct Partial {
  std::vector<double> o, lse;
};

class LseMergeCpu : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(LseMergeCpu, RandomSplitsInRandomOrderEqualOneShot) {
  const auto [causal, parts] = GetParam();
  const std::int64_t cq = 40, ck = 120;
  const int a = 4, nkv = 2, d = 64;
  const auto p_full = make_attention_params(cq, ck, a, nkv, d, causal);
  const auto q = test::random_vector<double>(cq * p_full.ld_q, 1);
  const auto k = test::random_vector<double>(ck * p_full.ld_k, 2, -2, 2);
  const auto v = test::random_vector<double>(ck * p_full.ld_v, 3);
  const auto qp = test::iota_positions(cq, 50);  // queries 50..89 over keys 0..119
  const auto kp = test::iota_positions(ck);
  std::vector<double> o_ref(cq * p_full.ld_o), lse_ref(a * cq);
  cpu::attention_reference<double>(p_full, q.data(), k.data(), v.data(), qp.data(), kp.data(),
                                   o_ref.data(), lse_ref.data());

  std::mt19937_64 gen(parts * 7 + causal);
  for (int trial = 0; trial < 5; ++trial) {
    // Random assignment of keys to parts (non-contiguous subsets, some possibly empty).
    std::vector<std::vector<std::int64_t>> subset(parts);
    for (std::int64_t j = 0; j < ck; ++j)
      subset[gen() % parts].push_back(j);
    std::vector<Partial> partial;
    for (const auto& keys : subset) {
      const auto n = static_cast<std::int64_t>(keys.size());
      const auto p = make_attention_params(cq, n, a, nkv, d, causal);
      std::vector<double> ks(std::max<std::int64_t>(n, 1) * p.ld_k), vs(ks.size());
      std::vector<std::int64_t> kps(n);
      for (std::int64_t j = 0; j < n; ++j) {
        std::copy_n(k.begin() + keys[j] * p.ld_k, p.ld_k, ks.begin() + j * p.ld_k);
        std::copy_n(v.begin() + keys[j] * p.ld_v, p.ld_v, vs.begin() + j * p.ld_v);
        kps[j] = kp[keys[j]];
      }
      Partial r{std::vector<double>(cq * p.ld_o), std::vector<double>(a * cq)};
      cpu::attention_forward<double>(p, q.data(), ks.data(), vs.data(), qp.data(), kps.data(),
                                     r.o.data(), r.lse.data());
      partial.push_back(std::move(r));
    }
    std::shuffle(partial.begin(), partial.end(), gen);
    Partial run{std::vector<double>(cq * p_full.ld_o, 0.0), std::vector<double>(a * cq, -INFINITY)};
    for (const Partial& part : partial) {
      cpu::lse_merge<double>(cq, a, d, run.o.data(), p_full.ld_o, run.lse.data(), part.o.data(),
                             p_full.ld_o, part.lse.data(), run.o.data(), p_full.ld_o,
                             run.lse.data());
    }
    EXPECT_LE(test::max_abs_diff(run.o, o_ref), 1e-12) << "trial " << trial;
    EXPECT_LE(test::max_abs_diff(run.lse, lse_ref), 1e-12) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Splits, LseMergeCpu,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(2, 3, 8)));

TEST(LseMergeCpuEdge, EmptyPartialIsNeutralAndMergeCommutes) {
  const std::int64_t cq = 3;
  const int a = 2, d = 64;
  auto o_a = test::random_vector<double>(cq * a * d, 1);
  auto o_b = test::random_vector<double>(cq * a * d, 2);
  std::vector<double> lse_a{0.3, -1.0, 5.0, 2.0, -INFINITY, 1e3};
  std::vector<double> lse_b{-INFINITY, 0.7, 4.0, 2.0, -INFINITY, -1e3};
  std::vector<double> nan_o(o_b.size(), NAN);  // an empty partial's o must not matter
  std::vector<double> empty_lse(6, -INFINITY), o(o_a.size()), lse(6), o2(o_a.size()), lse2(6);

  cpu::lse_merge<double>(cq, a, d, o_a.data(), a * d, lse_a.data(), nan_o.data(), a * d,
                         empty_lse.data(), o.data(), a * d, lse.data());
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(lse[i], lse_a[i]);
  for (std::size_t i = 0; i < o.size(); ++i) {
    const bool row_empty = std::isinf(lse_a[(i % (a * d)) / d * cq + i / (a * d)]);
    EXPECT_EQ(o[i], row_empty ? 0.0 : o_a[i]);  // bit-identical, no NaN
  }
  cpu::lse_merge<double>(cq, a, d, o_a.data(), a * d, lse_a.data(), o_b.data(), a * d, lse_b.data(),
                         o.data(), a * d, lse.data());
  cpu::lse_merge<double>(cq, a, d, o_b.data(), a * d, lse_b.data(), o_a.data(), a * d, lse_a.data(),
                         o2.data(), a * d, lse2.data());
  EXPECT_EQ(o, o2);
  EXPECT_EQ(lse, lse2);
  EXPECT_EQ(lse[4], -INFINITY);
  EXPECT_NEAR(lse[3], 2.0 + std::log(2.0), 1e-15);
  EXPECT_NEAR(lse[5], 1e3, 1e-12);  // no overflow with large lse
  for (double x : o)
    EXPECT_FALSE(std::isnan(x));
}

TEST(LseMergeWeights, Formula) {
  const auto w = merge_weights(1.0, 2.0);
  EXPECT_NEAR(w.lse, std::log(std::exp(1.0) + std::exp(2.0)), 1e-15);
  EXPECT_NEAR(w.w_a, std::exp(1.0 - w.lse), 1e-15);
  EXPECT_NEAR(w.w_b, std::exp(2.0 - w.lse), 1e-15);
  const auto e = merge_weights(-INFINITY, -INFINITY);
  EXPECT_EQ(e.lse, -INFINITY);
  EXPECT_EQ(e.w_a, 0.0);
  EXPECT_EQ(e.w_b, 0.0);
  const auto f = merge_weights(-INFINITY, 3.0f);
  EXPECT_EQ(f.lse, 3.0f);
  EXPECT_EQ(f.w_b, 1.0f);
}

}  // namespace
}  // namespace suite::kernels

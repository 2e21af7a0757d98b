// Token-wise CPU kernels against their formulas; dropout statistics and shard equality.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/core/counter_rng.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

TEST(LayerNormCpu, MatchesFormula) {
  const std::int64_t rows = 5, cols = 77;
  auto x = test::random_vector<double>(rows * cols, 11, -3, 5);
  auto gamma = test::random_vector<double>(cols, 12, 0.5, 1.5);
  auto beta = test::random_vector<double>(cols, 13);
  std::vector<double> y(x.size());
  cpu::layernorm_forward<double>(rows, cols, x.data(), gamma.data(), beta.data(), 1e-5, y.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    long double mean = 0, var = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      mean += x[r * cols + c];
    mean /= cols;
    for (std::int64_t c = 0; c < cols; ++c)
      var += std::pow(x[r * cols + c] - mean, 2);
    var /= cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const long double want =
          (x[r * cols + c] - mean) / std::sqrt(var + 1e-5L) * gamma[c] + beta[c];
      EXPECT_NEAR(y[r * cols + c], static_cast<double>(want), 1e-12);
    }
  }
}

TEST(LayerNormCpu, NormalisesRowsWithLargeMeanInFloat) {
  const std::int64_t rows = 3, cols = 1024;
  auto x = test::random_vector<float>(rows * cols, 21, 1000, 1001);  // cancellation trap
  std::vector<float> gamma(cols, 1.0f), beta(cols, 0.0f), y(x.size());
  cpu::layernorm_forward<float>(rows, cols, x.data(), gamma.data(), beta.data(), 0.0f, y.data());
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, sq = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      mean += y[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c)
      sq += double(y[r * cols + c]) * y[r * cols + c];
    EXPECT_NEAR(mean / cols, 0.0, 1e-3);
    EXPECT_NEAR(sq / cols, 1.0, 1e-2);  // x itself is only stored to ~6e-5 relative
  }
}

TEST(GeluCpu, TanhApproximationValues) {
  const std::vector<double> x{-20, -1, -0.5, 0, 0.5, 1, 3, 20};
  std::vector<double> y(x.size());
  cpu::gelu_forward<double>(static_cast<std::int64_t>(x.size()), x.data(), y.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double xi = x[i];
    const long double want = 0.5L * xi *
                             (1 + std::tanh(std::sqrt(2.0L / 3.14159265358979323846L) *
                                            (xi + 0.044715L * xi * xi * xi)));
    EXPECT_NEAR(y[i], static_cast<double>(want), 1e-15 * std::max(1.0, std::abs(x[i])));
  }
  EXPECT_NEAR(y[5], 0.841191990607, 1e-11);  // tanh form at x = 1 (erf form: 0.841344746)
  EXPECT_EQ(y[3], 0.0);
}

TEST(ResidualAddCpu, AddsElementwiseInPlace) {
  std::vector<float> x{1, 2, 3}, r{0.5f, -2, 4};
  cpu::residual_add<float>(3, x.data(), r.data(), x.data());
  EXPECT_EQ(x, (std::vector<float>{1.5f, 0, 7}));
}

TEST(DropoutCpu, ZeroProbabilityKeepsEverything) {
  auto x = test::random_vector<float>(4 * 33, 5);
  std::vector<float> y(x.size());
  std::vector<std::uint8_t> mask(x.size());
  cpu::dropout_forward<float>(4, 33, 0.0f, 99, 0, x.data(), y.data(), mask.data());
  EXPECT_EQ(y, x);
  for (auto m : mask)
    EXPECT_EQ(m, 1);
}

TEST(DropoutCpu, KeepRateScaleAndMean) {
  for (float p : {0.1f, 0.5f, 0.9f}) {
    const std::int64_t rows = 256, cols = 512, n = rows * cols;
    std::vector<double> x(n, 1.0), y(n);
    std::vector<std::uint8_t> mask(n);
    cpu::dropout_forward<double>(rows, cols, p, 1234, 0, x.data(), y.data(), mask.data());
    double kept = 0, sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      kept += mask[i];
      sum += y[i];
      EXPECT_EQ(y[i], mask[i] ? 1.0 / (1.0 - p) : 0.0);
    }
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(kept / n, 1.0 - p, 5 * sigma) << "p=" << p;
    EXPECT_NEAR(sum / n, 1.0, 5 * sigma / (1 - p)) << "p=" << p;  // E[y] = x
  }
}

TEST(DropoutCpu, RowShardsDrawTheUnshardedMasks) {
  const std::int64_t rows = 24, cols = 40;  // e.g. s = 12, b = 2 tokens, h = 40
  auto x = test::random_vector<float>(rows * cols, 7);
  std::vector<float> y_full(x.size());
  std::vector<std::uint8_t> m_full(x.size());
  cpu::dropout_forward<float>(rows, cols, 0.3f, 42, 0, x.data(), y_full.data(), m_full.data());
  for (int t : {2, 3, 4}) {  // SP degree: shard i holds rows [i*rows/t, (i+1)*rows/t)
    const std::int64_t per = rows / t;
    for (int i = 0; i < t; ++i) {
      std::vector<float> y(per * cols);
      std::vector<std::uint8_t> m(per * cols);
      cpu::dropout_forward<float>(per, cols, 0.3f, 42, i * per, x.data() + i * per * cols, y.data(),
                                  m.data());
      for (std::int64_t e = 0; e < per * cols; ++e) {
        ASSERT_EQ(m[e], m_full[i * per * cols + e]) << "t=" << t << " shard " << i;
        ASSERT_EQ(y[e], y_full[i * per * cols + e]);
      }
    }
  }
  // float and double backends draw the same bits.
  std::vector<double> xd(x.begin(), x.end()), yd(x.size());
  std::vector<std::uint8_t> md(x.size());
  cpu::dropout_forward<double>(rows, cols, 0.3f, 42, 0, xd.data(), yd.data(), md.data());
  EXPECT_EQ(md, m_full);
}

TEST(DropoutCpu, SeedChangesMaskAndBadProbabilityThrows) {
  std::vector<float> x(1000, 1.0f), y(1000);
  std::vector<std::uint8_t> a(1000), b(1000);
  cpu::dropout_forward<float>(10, 100, 0.5f, 1, 0, x.data(), y.data(), a.data());
  cpu::dropout_forward<float>(10, 100, 0.5f, 2, 0, x.data(), y.data(), b.data());
  EXPECT_NE(a, b);
  EXPECT_THROW(cpu::dropout_forward<float>(10, 100, 1.0f, 1, 0, x.data(), y.data(), a.data()),
               std::invalid_argument);
  EXPECT_THROW(cpu::dropout_forward<float>(10, 100, -0.1f, 1, 0, x.data(), y.data(), a.data()),
               std::invalid_argument);
}

TEST(CounterRng, BitsAreBalancedAndKeysDistinct) {
  std::set<std::uint64_t> seen;
  int ones = 0;
  const int n = 1 << 14;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t h = counter_hash(7, i / 128, i % 128);
    seen.insert(h);
    ones += static_cast<int>(h >> 63);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
  EXPECT_NEAR(ones, n / 2, 5 * std::sqrt(n / 4.0));
  EXPECT_NE(counter_hash(7, 1, 2), counter_hash(7, 2, 1));
  EXPECT_EQ(dropout_threshold(0.0), 0u);
  EXPECT_TRUE(dropout_keep(0, 0));
}

}  // namespace
}  // namespace suite::kernels

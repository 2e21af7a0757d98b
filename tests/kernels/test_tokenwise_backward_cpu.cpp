// Backward of the token-wise CPU kernels against central differences of their forwards (fp64),
// and the shared element-wise helpers (tokenwise_grad.hpp) the CUDA kernels run too.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "kernels/tokenwise/tokenwise_grad.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

// d/de of f(x + e v) at e = 0 by central differences, f = <w, forward(x)>.
double directional(const std::function<double(const Vec&)>& f, const Vec& x, const Vec& v) {
  const double h = 1e-6;
  Vec plus = x, minus = x;
  for (std::size_t i = 0; i < x.size(); ++i) {
    plus[i] += h * v[i];
    minus[i] -= h * v[i];
  }
  return (f(plus) - f(minus)) / (2 * h);
}

TEST(TokenwiseGrad, HelpersMatchTheirFormulas) {
  EXPECT_DOUBLE_EQ(softmax_grad(0.25, 2.0, 0.5), 0.25 * 1.5);
  EXPECT_DOUBLE_EQ(dropout_grad(3.0, std::uint8_t{1}, 2.0), 6.0);
  EXPECT_DOUBLE_EQ(dropout_grad(3.0, std::uint8_t{0}, 2.0), 0.0);
  EXPECT_DOUBLE_EQ(layernorm_input_grad(1.0, 0.5, 0.25, 0.125, 2.0), 2.0 * (1 - 0.25 - 0.0625));
  EXPECT_EQ(layernorm_mean_index(3), 6);
  EXPECT_EQ(layernorm_rstd_index(3), 7);
  EXPECT_EQ(row_major_index(2, 5, 7), 19);
  for (double x : {-6.0, -1.0, -0.3, 0.0, 0.4, 2.0, 7.0}) {
    const double h = 1e-6;
    EXPECT_NEAR(gelu_tanh_grad(x), (gelu_tanh(x + h) - gelu_tanh(x - h)) / (2 * h), 1e-8) << x;
  }
}

TEST(LayerNormBackwardCpu, InputWeightAndBiasGradientsMatchFiniteDifferences) {
  const std::int64_t rows = 6, cols = 37;
  const Vec x = test::random_vector<double>(rows * cols, 1, -2, 3);
  const Vec gamma = test::random_vector<double>(cols, 2, 0.5, 1.5);
  const Vec beta = test::random_vector<double>(cols, 3);
  const Vec w = test::random_vector<double>(rows * cols, 4);  // dy
  Vec dx(x.size()), dg(cols), db(cols);
  cpu::layernorm_backward<double>(rows, cols, x.data(), gamma.data(), w.data(), 1e-5, dx.data(),
                                  dg.data(), db.data());
  auto loss = [&](const Vec& xx, const Vec& gg, const Vec& bb) {
    Vec y(xx.size());
    cpu::layernorm_forward<double>(rows, cols, xx.data(), gg.data(), bb.data(), 1e-5, y.data());
    return dot(w, y);
  };
  const Vec vx = test::random_vector<double>(x.size(), 5),
            vg = test::random_vector<double>(cols, 6);
  EXPECT_NEAR(directional([&](const Vec& p) { return loss(p, gamma, beta); }, x, vx), dot(dx, vx),
              1e-7);
  EXPECT_NEAR(directional([&](const Vec& p) { return loss(x, p, beta); }, gamma, vg), dot(dg, vg),
              1e-7);
  EXPECT_NEAR(directional([&](const Vec& p) { return loss(x, gamma, p); }, beta, vg), dot(db, vg),
              1e-7);
}

TEST(LayerNormBackwardCpu, WeightGradientsOfRowBlocksAddUp) {
  // What SP's all-reduce relies on: the sums over row shards add up to the sum over all rows.
  const std::int64_t rows = 8, cols = 16;
  const Vec x = test::random_vector<double>(rows * cols, 7),
            dy = test::random_vector<double>(rows * cols, 8);
  const Vec gamma(cols, 1.0);
  Vec dx(x.size()), dg(cols), db(cols), dg0(cols), db0(cols), dg1(cols), db1(cols);
  cpu::layernorm_backward<double>(rows, cols, x.data(), gamma.data(), dy.data(), 1e-5, dx.data(),
                                  dg.data(), db.data());
  cpu::layernorm_backward<double>(3, cols, x.data(), gamma.data(), dy.data(), 1e-5, dx.data(),
                                  dg0.data(), db0.data());
  cpu::layernorm_backward<double>(rows - 3, cols, x.data() + 3 * cols, gamma.data(),
                                  dy.data() + 3 * cols, 1e-5, dx.data(), dg1.data(), db1.data());
  for (std::int64_t c = 0; c < cols; ++c) {
    EXPECT_NEAR(dg[c], dg0[c] + dg1[c], 1e-12);
    EXPECT_NEAR(db[c], db0[c] + db1[c], 1e-12);
  }
}

TEST(GeluBackwardCpu, MatchesFiniteDifferencesAndMayAlias) {
  const std::int64_t n = 101;
  const Vec x = test::random_vector<double>(n, 9, -4, 4), w = test::random_vector<double>(n, 10);
  Vec dx(n);
  cpu::gelu_backward<double>(n, x.data(), w.data(), dx.data());
  auto loss = [&](const Vec& xx) {
    Vec y(xx.size());
    cpu::gelu_forward<double>(n, xx.data(), y.data());
    return dot(w, y);
  };
  const Vec v = test::random_vector<double>(n, 11);
  EXPECT_NEAR(directional(loss, x, v), dot(dx, v), 1e-7);
  Vec inplace = w;
  cpu::gelu_backward<double>(n, x.data(), inplace.data(), inplace.data());
  EXPECT_EQ(inplace, dx);
}

TEST(DropoutBackwardCpu, UsesTheForwardsMask) {
  const std::int64_t rows = 9, cols = 31;
  for (float p : {0.0f, 0.3f}) {
    const Vec x = test::random_vector<double>(rows * cols, 12),
              w = test::random_vector<double>(rows * cols, 13);
    Vec y(x.size()), dx(x.size());
    std::vector<std::uint8_t> mask(x.size());
    cpu::dropout_forward<double>(rows, cols, p, 5, 100, x.data(), y.data(), mask.data());
    cpu::dropout_backward<double>(rows * cols, p, mask.data(), w.data(), dx.data());
    // The forward is linear in x for a fixed mask: <w, y(x)> = <dx, x>.
    EXPECT_NEAR(dot(w, y), dot(dx, x), 1e-12) << p;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!mask[i]) {
        EXPECT_EQ(dx[i], 0.0);
      }
  }
}

TEST(SoftmaxDropoutBackwardCpu, MatchesFiniteDifferencesOfSoftmaxThenDropout) {
  const std::int64_t rows = 4, cols = 23;
  const float p = 0.25f;
  const Vec z = test::random_vector<double>(rows * cols, 14, -3, 3);
  const Vec w = test::random_vector<double>(rows * cols, 15);
  std::vector<std::uint8_t> mask(rows * cols);
  for (std::size_t i = 0; i < mask.size(); ++i)
    mask[i] = (i * 7 + 3) % 4 != 0;
  auto softmax = [&](const Vec& zz) {
    Vec pr(zz.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = -1e300, l = 0;
      for (std::int64_t c = 0; c < cols; ++c)
        m = std::max(m, zz[r * cols + c]);
      for (std::int64_t c = 0; c < cols; ++c)
        l += std::exp(zz[r * cols + c] - m);
      for (std::int64_t c = 0; c < cols; ++c)
        pr[r * cols + c] = std::exp(zz[r * cols + c] - m) / l;
    }
    return pr;
  };
  auto loss = [&](const Vec& zz) {
    const Vec pr = softmax(zz);
    double s = 0;
    for (std::size_t i = 0; i < pr.size(); ++i)
      s += w[i] * (mask[i] ? pr[i] / (1 - p) : 0.0);
    return s;
  };
  Vec g = w;
  const Vec probs = softmax(z);
  cpu::softmax_dropout_backward<double>(rows, cols, p, probs.data(), mask.data(), g.data());
  const Vec v = test::random_vector<double>(z.size(), 16);
  EXPECT_NEAR(directional(loss, z, v), dot(g, v), 1e-7);
}

}  // namespace
}  // namespace suite::kernels

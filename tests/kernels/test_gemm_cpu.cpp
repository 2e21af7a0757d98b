// Blocked CPU GEMM against the naive triple loop: transposes, odd sizes, block-boundary
// sizes, padded leading dimensions, alpha/beta.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/gemm/gemm_cpu.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using Shape = std::tuple<int, int, int, bool, bool>;  // m, n, k, trans_a, trans_b

template <class T>
void check_gemm(const Shape& s, T alpha, T beta, double rel_tol) {
  const auto [m, n, k, ta, tb] = s;
  const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  const std::int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;  // padded rows
  auto A = test::random_vector<T>(a_rows * lda, 1);
  auto B = test::random_vector<T>(b_rows * ldb, 2);
  auto C = test::random_vector<T>(m * ldc, 3);
  auto C_ref = C;
  cpu::gemm<T>(ta, tb, m, n, k, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  cpu::gemm_naive<T>(ta, tb, m, n, k, alpha, A.data(), lda, B.data(), ldb, beta, C_ref.data(), ldc);
  // Each entry sums k products of magnitude <= 1.
  EXPECT_LE(test::max_abs_diff(C, C_ref), rel_tol * (k + 1)) << m << "x" << n << "x" << k;
}

class GemmCpu : public ::testing::TestWithParam<Shape> {};

TEST_P(GemmCpu, BlockedMatchesNaiveDouble) {
  check_gemm<double>(GetParam(), 1.0, 0.0, 1e-15);
}
TEST_P(GemmCpu, BlockedMatchesNaiveFloat) {
  check_gemm<float>(GetParam(), 1.0f, 0.0f, 1e-6);
}
TEST_P(GemmCpu, AlphaBetaDouble) {
  check_gemm<double>(GetParam(), -0.75, 0.5, 1e-15);
}

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const auto [m, n, k, ta, tb] = info.param;
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
         (ta ? "_At" : "_A") + (tb ? "_Bt" : "_B");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmCpu,
                         ::testing::Combine(::testing::Values(1, 7, 130),
                                            ::testing::Values(1, 13, 1030),
                                            ::testing::Values(1, 5, 257), ::testing::Bool(),
                                            ::testing::Bool()),
                         shape_name);

TEST(GemmCpuEdge, BetaZeroIgnoresNaNInC) {
  std::vector<double> A{1, 2, 3, 4}, B{1, 0, 0, 1};
  std::vector<double> C(4, std::numeric_limits<double>::quiet_NaN());
  cpu::gemm<double>(false, false, 2, 2, 2, 1.0, A.data(), 2, B.data(), 2, 0.0, C.data(), 2);
  EXPECT_EQ(C, A);
}

TEST(GemmCpuEdge, ZeroDepthScalesC) {
  std::vector<float> C{1, 2, 3};
  cpu::gemm<float>(false, false, 1, 3, 0, 1.0f, nullptr, 1, nullptr, 3, 2.0f, C.data(), 3);
  EXPECT_EQ(C, (std::vector<float>{2, 4, 6}));
}

TEST(GemmCpuEdge, NegativeDimensionThrows) {
  float c = 0;
  EXPECT_THROW(cpu::gemm<float>(false, false, -1, 1, 1, 1.0f, &c, 1, &c, 1, 0.0f, &c, 1),
               std::invalid_argument);
}

}  // namespace
}  // namespace suite::kernels

// CPU attention backward: the long-double reference against finite differences of the forward
// reference, the tiled BLAS kernel against both (every mask kind, GQA, d = 64 and 128, odd and
// multi-tile sizes, strided rows, fp32 and fp64), key blocks adding up to the full gradient
// with the final lse (the ring's use), the vectorised row operations, and the CPU engine.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/attention/softmax_rows_cpu.hpp"
#include "kernels/core/bf16.hpp"
#include "tests/kernels/attention_blocks.hpp"

namespace suite::kernels {
namespace {

using test::Kind;

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// sum(d_o * o) for o = attention of q over k, v (the forward reference, long double inside).
double loss(const AttentionParams& p, const test::Block& blk, const std::vector<double>& q,
            const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<double>& d_o) {
  std::vector<double> o(d_o.size(), 0.0), lse(static_cast<std::size_t>(p.heads * p.cq));
  cpu::attention_reference<double>(p, q.data(), k.data(), v.data(), blk.qp.data(), blk.kp.data(),
                                   o.data(), lse.data());
  double l = 0;
  for (std::size_t i = 0; i < o.size(); ++i)
    l += o[i] * d_o[i];
  return l;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

// The directional derivative of the loss along a random direction, by central differences,
// against <gradient, direction> for gradients dq, dk, dv.
void expect_directional_derivative(const test::AttentionProblem& x, const std::vector<double>& d_o,
                                   const std::vector<double>& dq, const std::vector<double>& dk,
                                   const std::vector<double>& dv, const std::string& what) {
  const auto q = to_double(x.q), k = to_double(x.k), v = to_double(x.v);
  const auto uq = test::random_vector<double>(q.size(), 21),
             uk = test::random_vector<double>(k.size(), 22),
             uv = test::random_vector<double>(v.size(), 23);
  const double eps = 1e-6;
  auto shifted = [&](double sign) {
    auto qs = q, ks = k, vs = v;
    for (std::size_t i = 0; i < q.size(); ++i)
      qs[i] += sign * eps * uq[i];
    for (std::size_t i = 0; i < k.size(); ++i)
      ks[i] += sign * eps * uk[i];
    for (std::size_t i = 0; i < v.size(); ++i)
      vs[i] += sign * eps * uv[i];
    return loss(x.p, x.blk, qs, ks, vs, d_o);
  };
  const double numeric = (shifted(+1) - shifted(-1)) / (2 * eps);
  const double analytic = dot(dq, uq) + dot(dk, uk) + dot(dv, uv);
  EXPECT_NEAR(analytic, numeric, 1e-7 * std::max(1.0, std::abs(numeric))) << what;
}

class BackwardFiniteDifference : public ::testing::TestWithParam<std::tuple<Kind, int>> {};

TEST_P(BackwardFiniteDifference, ReferenceAndTiledKernelMatchFiniteDifferences) {
  const auto [kind, kv_heads] = GetParam();
  const auto x = test::make_problem(kind, 6, 9, 4, kv_heads, 64);
  const auto ref = test::make_backward(x);
  const auto d_o = to_double(ref.d_o);
  expect_directional_derivative(x, d_o, ref.dq, ref.dk, ref.dv, "reference");

  // The tiled kernel from its own forward's lse (accumulating into zeros).
  const auto q = to_double(x.q), k = to_double(x.k), v = to_double(x.v);
  std::vector<double> o(d_o.size(), 0.0), lse(ref.lse.size()), delta(ref.lse.size()),
      dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  cpu::attention_forward<double>(x.p, q.data(), k.data(), v.data(), x.blk.qp.data(),
                                 x.blk.kp.data(), o.data(), lse.data());
  cpu::attention_backward_delta<double>(x.p.cq, x.p.heads, x.p.head_dim, o.data(), d_o.data(),
                                        x.p.ld_o, delta.data());
  cpu::attention_backward<double>(x.p, q.data(), k.data(), v.data(), d_o.data(), lse.data(),
                                  delta.data(), x.blk.qp.data(), x.blk.kp.data(), dq.data(),
                                  dk.data(), dv.data());
  expect_directional_derivative(x, d_o, dq, dk, dv, "tiled");
}

INSTANTIATE_TEST_SUITE_P(Kinds, BackwardFiniteDifference,
                         ::testing::Combine(::testing::Values(Kind::full, Kind::top_left,
                                                              Kind::bottom_right, Kind::zigzag,
                                                              Kind::striped),
                                            ::testing::Values(4, 2)),
                         [](const auto& info) {
                           return std::string(test::kind_name(std::get<0>(info.param))) + "_kv" +
                                  std::to_string(std::get<1>(info.param));
                         });

// (kind, cq, ck, heads, kv_heads, head_dim, fp64?)
using Shape = std::tuple<Kind, std::int64_t, std::int64_t, int, int, int, bool>;

std::string shape_name(const Shape& s) {
  return std::string(test::kind_name(std::get<0>(s))) + "_q" + std::to_string(std::get<1>(s)) +
         "_k" + std::to_string(std::get<2>(s)) + "_kv" + std::to_string(std::get<4>(s)) + "_d" +
         std::to_string(std::get<5>(s)) + (std::get<6>(s) ? "_fp64" : "_fp32");
}

class BackwardTiled : public ::testing::TestWithParam<Shape> {};

template <class T>
void run_tiled_against_reference(const Shape& shape) {
  const auto [kind, cq, ck, heads, kv_heads, d, fp64] = shape;
  const auto x = test::make_problem(kind, cq, ck, heads, kv_heads, d);
  const auto ref = test::make_backward(x);
  const std::vector<T> q(x.q.begin(), x.q.end()), k(x.k.begin(), x.k.end()),
      v(x.v.begin(), x.v.end()), d_o(ref.d_o.begin(), ref.d_o.end());
  // Final statistics from the tiled forward, as a training step has them.
  std::vector<T> o(d_o.size(), T(0)), lse(ref.lse.size()), delta(ref.lse.size());
  cpu::attention_forward<T>(x.p, q.data(), k.data(), v.data(), x.blk.qp.data(), x.blk.kp.data(),
                            o.data(), lse.data());
  cpu::attention_backward_delta<T>(x.p.cq, heads, d, o.data(), d_o.data(), x.p.ld_o, delta.data());
  // Padding between rows starts as NaN: the kernel must not read it into the data.
  std::vector<T> dq(q.size(), T(0)), dk(k.size(), T(0)), dv(v.size(), T(0));
  for (std::int64_t i = 0; i < cq; ++i)
    for (std::int64_t c = static_cast<std::int64_t>(heads) * d; c < x.p.ld_q; ++c)
      dq[static_cast<std::size_t>(i * x.p.ld_q + c)] = std::numeric_limits<T>::quiet_NaN();
  cpu::attention_backward<T>(x.p, q.data(), k.data(), v.data(), d_o.data(), lse.data(),
                             delta.data(), x.blk.qp.data(), x.blk.kp.data(), dq.data(), dk.data(),
                             dv.data());
  test::expect_grads_match(x.p, ref, dq, dk, dv, fp64 ? 1e-10 : 2e-4, test::kind_name(kind));
}

TEST_P(BackwardTiled, MatchesReference) {
  if (std::get<6>(GetParam()))
    run_tiled_against_reference<double>(GetParam());
  else
    run_tiled_against_reference<float>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Shapes, BackwardTiled,
                         ::testing::Combine(::testing::ValuesIn(test::kAllKinds),
                                            ::testing::Values<std::int64_t>(1, 37, 130),
                                            ::testing::Values<std::int64_t>(1, 53, 300),
                                            ::testing::Values(4), ::testing::Values(4, 1),
                                            ::testing::Values(64, 128), ::testing::Bool()),
                         [](const auto& info) { return shape_name(info.param); });

// The ring's use: with the final lse and delta, each key block's contributions computed on
// its own add up to the gradient over all keys (dq summed over blocks; dk, dv per block).
TEST(BackwardKeyBlocks, ContributionsAddUpToTheFullGradient) {
  for (bool zigzag : {false, true}) {
    const int n = 4;
    const std::int64_t c = 40;
    const auto layout = zigzag ? test::Layout::zigzag : test::Layout::contiguous;
    const test::AttentionProblem x = test::all_keys_problem(layout, 2, n, c);
    const auto ref = test::make_backward(x);
    const auto q = to_double(x.q), k = to_double(x.k), v = to_double(x.v), d_o = to_double(ref.d_o);
    std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
    for (int r = 0; r < n; ++r) {  // key block r: rows [r c, (r+1) c)
      AttentionParams pb = x.p;
      pb.ck = c;
      const std::int64_t off = r * c * x.p.ld_k;
      cpu::attention_backward<double>(pb, q.data(), k.data() + off, v.data() + off, d_o.data(),
                                      ref.lse.data(), ref.delta.data(), x.blk.qp.data(),
                                      x.blk.kp.data() + r * c, dq.data(), dk.data() + off,
                                      dv.data() + off);
    }
    test::expect_grads_match(x.p, ref, dq, dk, dv, 1e-10, zigzag ? "zigzag" : "contiguous");
  }
}

TEST(SoftmaxRows, ExpApproxIsAccurateAndZeroBelowRange) {
  double worst = 0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = -87.0f + static_cast<float>(i) * 1e-4f;
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(cpu::exp_approx(x) - ref) / ref);
  }
  EXPECT_LT(worst, 3e-7);  // about two units in the last place of a float
  EXPECT_EQ(cpu::exp_approx(-INFINITY), 0.0f);
  EXPECT_EQ(cpu::exp_approx(-200.0f), 0.0f);
  EXPECT_EQ(cpu::exp_approx(0.0f), 1.0f);
}

template <class T>
void check_row_ops(std::int64_t n) {
  auto x = test::random_vector<T>(static_cast<std::size_t>(n), 40 + n, -5, 1);
  std::vector<std::int64_t> kp(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j)
    kp[j] = (j * 7) % 11;
  auto masked = x;
  cpu::mask_row(masked.data(), kp.data(), n, 2, 5);  // keys 2..5 visible
  T expect_max = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < n; ++j) {
    const bool hidden = kp[j] > 5 || kp[j] < 2;
    ASSERT_EQ(std::isinf(masked[j]), hidden) << j;
    if (!hidden) expect_max = std::max(expect_max, x[j]);
  }
  // One online-softmax step from an empty state (max -inf, sum 0): the row's max, its
  // exponentials and their sum.
  auto e = masked;
  T m = -std::numeric_limits<T>::infinity(), sum = 0;
  std::vector<T> acc(3, T(1));
  cpu::online_softmax_rows(e.data(), 1, n, &m, &sum, acc.data(), 3);
  ASSERT_EQ(m, expect_max);
  if (expect_max == -std::numeric_limits<T>::infinity()) return;
  double want_sum = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double want =
        kp[j] > 5 || kp[j] < 2 ? 0.0 : std::exp(static_cast<double>(x[j] - expect_max));
    ASSERT_NEAR(e[j], want, 1e-6 * want) << j;
    want_sum += want;
  }
  ASSERT_NEAR(sum, want_sum, 1e-6 * want_sum);
  ASSERT_EQ(acc, std::vector<T>(3, T(1)));  // nothing accumulated yet: nothing rescaled
  auto dp = test::random_vector<T>(static_cast<std::size_t>(n), 50 + n);
  const auto dp0 = dp;
  cpu::softmax_grad_row(dp.data(), e.data(), n, T(0.25));
  for (std::int64_t j = 0; j < n; ++j)
    ASSERT_EQ(dp[j], e[j] * (dp0[j] - T(0.25))) << j;
}

TEST(SoftmaxRows, RowOpsMatchScalarLoopsOnEveryTailLength) {
  for (std::int64_t n = 1; n <= 70; ++n) {
    check_row_ops<float>(n);
    check_row_ops<double>(n);
  }
}

TEST(CpuEngineBackward, RunsTheTiledKernelAndAccumulatesIntoEveryGradType) {
  const auto x = test::make_problem(Kind::zigzag, 20, 24, 4, 2, 64);
  const auto ref = test::make_backward(x);
  auto engine = make_cpu_attention_engine(DType::fp32);
  EXPECT_EQ(engine->grad_type(), DType::fp32);
  EXPECT_EQ(make_cpu_attention_engine(DType::fp64)->grad_type(), DType::fp64);
  std::vector<float> o(ref.d_o.size(), 0.f), lse(ref.lse.size()), delta(ref.lse.size()),
      dq(x.q.size(), 0.f), dk(x.k.size(), 0.f), dv(x.v.size(), 0.f);
  engine->forward(x.p, x.blk.hint, x.q.data(), x.k.data(), x.v.data(), x.blk.qp.data(),
                  x.blk.kp.data(), o.data(), lse.data());
  engine->backward_delta(x.p.cq, x.p.heads, x.p.head_dim, o.data(), ref.d_o.data(), x.p.ld_o,
                         delta.data());
  engine->backward(x.p, x.blk.hint, x.q.data(), x.k.data(), x.v.data(), o.data(), ref.d_o.data(),
                   lse.data(), delta.data(), x.blk.qp.data(), x.blk.kp.data(), dq.data(), dk.data(),
                   dv.data());
  test::expect_grads_match(x.p, ref, dq, dk, dv, 2e-4, "engine");

  const std::vector<float> src = {1.5f, -2.25f, 3.0f};
  std::vector<float> f32 = {1.f, 1.f, 1.f};
  std::vector<double> f64 = {1.0, 1.0, 1.0};
  std::vector<bf16> b16 = {to_bf16(1.f), to_bf16(256.f), to_bf16(1.f)};
  engine->accumulate(f32.data(), DType::fp32, src.data(), 3);
  engine->accumulate(f64.data(), DType::fp64, src.data(), 3);
  engine->accumulate(b16.data(), DType::bf16, src.data(), 3);
  EXPECT_EQ(f32, (std::vector<float>{2.5f, -1.25f, 4.f}));
  EXPECT_EQ(f64, (std::vector<double>{2.5, -1.25, 4.0}));
  EXPECT_EQ(to_float(b16[0]), 2.5f);
  EXPECT_EQ(to_float(b16[1]), 254.f);  // 253.75 rounds to bf16's nearest (8 bits of mantissa)
  EXPECT_EQ(to_float(b16[2]), 4.f);
}

}  // namespace
}  // namespace suite::kernels

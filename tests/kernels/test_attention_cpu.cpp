// CPU attention: the shared index helpers, tiled vs reference over shapes / GQA / causal
// layouts / strides, fully masked queries, and the unfused path with its dropout masks.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/attention/attention_cpu.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

struct Result {
  std::vector<double> o, lse;
};

// Dense inputs for params p (any strides), seeded.
struct Inputs {
  std::vector<double> q, k, v;
  explicit Inputs(const AttentionParams& p, std::uint64_t seed)
      : q(test::random_vector<double>(std::max<std::int64_t>(p.cq, 1) * p.ld_q, seed)),
        k(test::random_vector<double>(std::max<std::int64_t>(p.ck, 1) * p.ld_k, seed + 1)),
        v(test::random_vector<double>(std::max<std::int64_t>(p.ck, 1) * p.ld_v, seed + 2)) {}
};

template <bool Tiled>
Result run(const AttentionParams& p, const Inputs& in, const std::vector<std::int64_t>& qp,
           const std::vector<std::int64_t>& kp) {
  Result r{std::vector<double>(std::max<std::int64_t>(p.cq, 1) * p.ld_o, 0.0),
           std::vector<double>(p.heads * p.cq)};
  if constexpr (Tiled) {
    cpu::attention_forward<double>(p, in.q.data(), in.k.data(), in.v.data(), qp.data(), kp.data(),
                                   r.o.data(), r.lse.data());
  } else {
    cpu::attention_reference<double>(p, in.q.data(), in.k.data(), in.v.data(), qp.data(), kp.data(),
                                     r.o.data(), r.lse.data());
  }
  return r;
}

void expect_same(const Result& a, const Result& b, double tol) {
  ASSERT_EQ(a.lse.size(), b.lse.size());
  for (std::size_t i = 0; i < a.lse.size(); ++i) {
    if (std::isinf(b.lse[i])) {
      EXPECT_EQ(a.lse[i], b.lse[i]) << "lse " << i;
    } else {
      EXPECT_NEAR(a.lse[i], b.lse[i], tol) << "lse " << i;
    }
  }
  for (double x : a.o)
    ASSERT_FALSE(std::isnan(x));
  EXPECT_LE(test::max_abs_diff(a.o, b.o), tol);
}

TEST(AttentionIndex, Helpers) {
  EXPECT_TRUE(key_visible(false, 0, 100));
  EXPECT_TRUE(key_visible(true, 5, 5));
  EXPECT_FALSE(key_visible(true, 5, 6));
  EXPECT_EQ(kv_head_for(0, 8, 2), 0);
  EXPECT_EQ(kv_head_for(3, 8, 2), 0);
  EXPECT_EQ(kv_head_for(4, 8, 2), 1);
  EXPECT_EQ(kv_head_for(7, 8, 8), 7);
  EXPECT_EQ(tile_count(0, 32), 0);
  EXPECT_EQ(tile_count(65, 32), 3);
  EXPECT_EQ(tile_end(2, 32, 65), 65);
  EXPECT_EQ(tile_end(0, 32, 65), 32);
  EXPECT_TRUE(tile_pair_visible(true, 10, 10));
  EXPECT_FALSE(tile_pair_visible(true, 9, 10));
  EXPECT_TRUE(tile_pair_visible(false, 9, 10));
  const auto q = test::iota_positions(4), k = test::iota_positions(4);
  EXPECT_EQ(visible_pairs(true, q.data(), 4, k.data(), 4), 10);
  EXPECT_EQ(visible_pairs(false, q.data(), 4, k.data(), 4), 16);
}

TEST(AttentionIndex, ValidationMessages) {
  auto p = make_attention_params(4, 4, 8, 2, 96, false);
  try {
    validate_attention(p);
    FAIL() << "head_dim 96 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 96 unsupported"), std::string::npos);
  }
  EXPECT_THROW(validate_attention(make_attention_params(4, 4, 8, 3, 64, false)),
               std::invalid_argument);
  p = make_attention_params(4, 4, 8, 2, 64, false);
  p.ld_q = 100;
  EXPECT_THROW(validate_attention(p), std::invalid_argument);
  EXPECT_NO_THROW(validate_attention(make_attention_params(4, 4, 8, 2, 128, true)));
}

// cq, ck, heads, kv_heads, d, causal
using Shape = std::tuple<int, int, int, int, int, bool>;
class AttentionCpu : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionCpu, TiledMatchesReference) {
  const auto [cq, ck, a, nkv, d, causal] = GetParam();
  const auto p = make_attention_params(cq, ck, a, nkv, d, causal);
  const Inputs in(p, 100 + cq);
  // Keys start below the queries so causal blocks mix visible and hidden pairs.
  const auto qp = test::iota_positions(cq, ck / 2);
  const auto kp = test::iota_positions(ck);
  expect_same(run<true>(p, in, qp, kp), run<false>(p, in, qp, kp), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionCpu,
    ::testing::Values(Shape{1, 1, 1, 1, 64, false}, Shape{33, 70, 4, 4, 64, false},
                      Shape{33, 70, 4, 4, 64, true}, Shape{100, 300, 8, 2, 64, true},
                      Shape{65, 129, 4, 1, 128, true}, Shape{40, 257, 6, 3, 128, false},
                      Shape{0, 16, 2, 1, 64, true}, Shape{16, 0, 2, 1, 64, true}));

TEST(AttentionCpuFloat, TiledFloatCloseToDoubleReference) {
  const auto p = make_attention_params(70, 150, 4, 2, 128, true);
  const Inputs in(p, 5);
  const auto qp = test::iota_positions(70, 80), kp = test::iota_positions(150);
  const Result ref = run<false>(p, in, qp, kp);
  std::vector<float> qf(in.q.begin(), in.q.end()), kf(in.k.begin(), in.k.end()),
      vf(in.v.begin(), in.v.end()), o(ref.o.size()), lse(ref.lse.size());
  cpu::attention_forward<float>(p, qf.data(), kf.data(), vf.data(), qp.data(), kp.data(), o.data(),
                                lse.data());
  EXPECT_LE(test::max_abs_diff(o, ref.o), 1e-5);
  EXPECT_LE(test::max_abs_diff(lse, ref.lse), 1e-5);
}

class AttentionLayouts : public ::testing::TestWithParam<test::Layout> {};

// Every (query rank, key rank) block pair of a 4-rank ring, as ring attention visits them.
TEST_P(AttentionLayouts, CausalBlocksMatchReference) {
  const int n = 4;
  const std::int64_t c = 48;
  const auto p = make_attention_params(c, c, 4, 2, 64, true);
  for (int rq = 0; rq < n; ++rq) {
    for (int rk = 0; rk < n; ++rk) {
      const Inputs in(p, 1000 + rq * n + rk);
      const auto qp = test::block_positions(GetParam(), rq, n, c);
      const auto kp = test::block_positions(GetParam(), rk, n, c);
      const Result tiled = run<true>(p, in, qp, kp);
      expect_same(tiled, run<false>(p, in, qp, kp), 1e-12);
      if (GetParam() == test::Layout::contiguous && rk > rq) {  // block entirely hidden
        for (double l : tiled.lse)
          EXPECT_EQ(l, -INFINITY);
        for (double x : tiled.o)
          EXPECT_EQ(x, 0.0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionLayouts,
                         ::testing::Values(test::Layout::contiguous, test::Layout::zigzag,
                                           test::Layout::striped),
                         [](const auto& info) {
                           return std::string(test::layout_name(info.param));
                         });

TEST(AttentionCpuMasking, FullyMaskedRowsGiveMinusInfAndZero) {
  const auto p = make_attention_params(6, 40, 2, 1, 64, true);
  const Inputs in(p, 77);
  // Queries 0..2 precede every key; 3..5 see some.
  const std::vector<std::int64_t> qp{0, 1, 2, 12, 30, 100};
  const auto kp = test::iota_positions(40, 10);
  for (const Result& r : {run<true>(p, in, qp, kp), run<false>(p, in, qp, kp)}) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 6; ++i) {
        const double l = r.lse[h * 6 + i];
        EXPECT_EQ(std::isinf(l) && l < 0, i < 3) << "h=" << h << " i=" << i;
        for (int c = 0; c < 64; ++c) {
          const double x = r.o[i * p.ld_o + h * 64 + c];
          ASSERT_FALSE(std::isnan(x));
          if (i < 3) {
            ASSERT_EQ(x, 0.0);
          }
        }
      }
    }
  }
}

// One batch element of an [s, b, h] tensor, addressed by pointer offset and row stride.
TEST(AttentionCpuStrides, BatchElementOfSbhTensor) {
  const int s = 50, b = 3, a = 4, nkv = 2, d = 64;
  auto p = make_attention_params(s, s, a, nkv, d, true);
  const Inputs dense_all(make_attention_params(s * b, s * b, a, nkv, d, true), 9);
  p.ld_q = p.ld_o = static_cast<std::int64_t>(b) * a * d;
  p.ld_k = p.ld_v = static_cast<std::int64_t>(b) * nkv * d;
  const auto pos = test::iota_positions(s);
  std::vector<double> o(static_cast<std::size_t>(s) * b * a * d, 0.0), lse(a * s);
  const int bi = 1;
  cpu::attention_forward<double>(
      p, dense_all.q.data() + bi * a * d, dense_all.k.data() + bi * nkv * d,
      dense_all.v.data() + bi * nkv * d, pos.data(), pos.data(), o.data() + bi * a * d, lse.data());
  // Same batch element copied out densely.
  const auto pd = make_attention_params(s, s, a, nkv, d, true);
  Inputs dense(pd, 1);
  for (int t = 0; t < s; ++t) {
    for (int e = 0; e < a * d; ++e)
      dense.q[t * a * d + e] = dense_all.q[(t * b + bi) * a * d + e];
    for (int e = 0; e < nkv * d; ++e) {
      dense.k[t * nkv * d + e] = dense_all.k[(t * b + bi) * nkv * d + e];
      dense.v[t * nkv * d + e] = dense_all.v[(t * b + bi) * nkv * d + e];
    }
  }
  const Result want = run<false>(pd, dense, pos, pos);
  for (int t = 0; t < s; ++t) {
    for (int e = 0; e < a * d; ++e) {
      ASSERT_NEAR(o[(t * b + bi) * a * d + e], want.o[t * a * d + e], 1e-12);
      ASSERT_EQ(o[(t * b) * a * d + e], 0.0);  // other batch elements untouched
    }
  }
  EXPECT_LE(test::max_abs_diff(lse, want.lse), 1e-12);
}

TEST(AttentionCpu, RejectsUnsupportedHeadDim) {
  const auto p = make_attention_params(2, 2, 1, 1, 32, false);
  std::vector<double> buf(64), lse(2);
  const auto pos = test::iota_positions(2);
  EXPECT_THROW(cpu::attention_forward<double>(p, buf.data(), buf.data(), buf.data(), pos.data(),
                                              pos.data(), buf.data(), lse.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace suite::kernels

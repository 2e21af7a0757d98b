// Unfused CPU attention: probabilities, masks, dropped probabilities and output against the
// fused path and the formulas; head-sharded runs reproduce the unsharded masks.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/attention/attention_cpu.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

struct Unfused {
  std::vector<double> probs, dropped, o, lse;
  std::vector<std::uint8_t> mask;
};

Unfused run_unfused(const AttentionParams& p, float drop, int head_offset, const double* q,
                    const double* k, const double* v, const std::vector<std::int64_t>& qp,
                    const std::vector<std::int64_t>& kp) {
  const std::size_t planes = static_cast<std::size_t>(p.heads) * p.cq * p.ck;
  Unfused u{std::vector<double>(planes), std::vector<double>(planes),
            std::vector<double>(p.cq * p.ld_o, 0.0), std::vector<double>(p.heads * p.cq),
            std::vector<std::uint8_t>(planes)};
  cpu::attention_unfused<double>(p, drop, 2024, head_offset, q, k, v, qp.data(), kp.data(),
                                 u.probs.data(), u.mask.data(), u.dropped.data(), u.o.data(),
                                 u.lse.data());
  return u;
}

TEST(AttentionUnfusedCpu, NoDropoutMatchesFused) {
  const auto p = make_attention_params(37, 90, 6, 2, 64, true);
  const auto q = test::random_vector<double>(p.cq * p.ld_q, 1);
  const auto k = test::random_vector<double>(p.ck * p.ld_k, 2);
  const auto v = test::random_vector<double>(p.ck * p.ld_v, 3);
  const std::vector<std::int64_t> qp = test::iota_positions(p.cq, 20);
  const std::vector<std::int64_t> kp = test::iota_positions(p.ck, 10);
  const Unfused u = run_unfused(p, 0.0f, 0, q.data(), k.data(), v.data(), qp, kp);
  std::vector<double> o(u.o.size()), lse(u.lse.size());
  cpu::attention_reference<double>(p, q.data(), k.data(), v.data(), qp.data(), kp.data(), o.data(),
                                   lse.data());
  EXPECT_LE(test::max_abs_diff(u.o, o), 1e-12);
  EXPECT_LE(test::max_abs_diff(u.lse, lse), 1e-12);
  EXPECT_EQ(u.probs, u.dropped);
  for (int h = 0; h < p.heads; ++h) {
    for (std::int64_t i = 0; i < p.cq; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < p.ck; ++j) {
        const double pr = u.probs[(h * p.cq + i) * p.ck + j];
        if (!key_visible(true, qp[i], kp[j])) {
          EXPECT_EQ(pr, 0.0);
        }
        sum += pr;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  }
}

TEST(AttentionUnfusedCpu, DropoutMaskScaleAndOutput) {
  const float drop = 0.25f;
  const auto p = make_attention_params(64, 64, 4, 4, 64, false);
  const auto q = test::random_vector<double>(p.cq * p.ld_q, 4);
  const auto k = test::random_vector<double>(p.ck * p.ld_k, 5);
  const auto v = test::random_vector<double>(p.ck * p.ld_v, 6);
  const auto pos = test::iota_positions(64);
  const Unfused u = run_unfused(p, drop, 0, q.data(), k.data(), v.data(), pos, pos);
  double kept = 0;
  for (std::size_t e = 0; e < u.mask.size(); ++e) {
    kept += u.mask[e];
    ASSERT_DOUBLE_EQ(u.dropped[e], u.mask[e] ? u.probs[e] / (1.0 - drop) : 0.0);
  }
  const double n = static_cast<double>(u.mask.size());
  EXPECT_NEAR(kept / n, 1.0 - drop, 5 * std::sqrt(drop * (1 - drop) / n));
  for (int h = 0; h < p.heads; ++h) {  // o = P_drop V, by the formula
    for (std::int64_t i = 0; i < p.cq; ++i) {
      for (int c = 0; c < 64; ++c) {
        double want = 0;
        for (std::int64_t j = 0; j < p.ck; ++j) {
          want += u.dropped[(h * p.cq + i) * p.ck + j] * v[j * p.ld_v + h * 64 + c];
        }
        ASSERT_NEAR(u.o[i * p.ld_o + h * 64 + c], want, 1e-12);
      }
    }
  }
}

// TP: rank r holds heads [r*a/t, (r+1)*a/t) and passes head_offset = r*a/t.
TEST(AttentionUnfusedCpu, HeadShardsReproduceMasks) {
  const int a = 8, nkv = 4, t = 2, d = 64;
  const auto full = make_attention_params(20, 30, a, nkv, d, true);
  const auto q = test::random_vector<double>(full.cq * full.ld_q, 7);
  const auto k = test::random_vector<double>(full.ck * full.ld_k, 8);
  const auto v = test::random_vector<double>(full.ck * full.ld_v, 9);
  const auto qp = test::iota_positions(20, 15), kp = test::iota_positions(30);
  const Unfused u = run_unfused(full, 0.4f, 0, q.data(), k.data(), v.data(), qp, kp);
  for (int r = 0; r < t; ++r) {
    auto p = make_attention_params(20, 30, a / t, nkv / t, d, true);
    p.ld_q = p.ld_o = full.ld_q;  // the shard reads its heads inside the full rows
    p.ld_k = p.ld_v = full.ld_k;
    const int h0 = r * a / t, kh0 = r * nkv / t;
    const Unfused s =
        run_unfused(p, 0.4f, h0, q.data() + h0 * d, k.data() + kh0 * d, v.data() + kh0 * d, qp, kp);
    const std::size_t plane = 20 * 30;
    for (std::size_t e = 0; e < s.mask.size(); ++e) {
      ASSERT_EQ(s.mask[e], u.mask[h0 * plane + e]) << "rank " << r;
      ASSERT_EQ(s.dropped[e], u.dropped[h0 * plane + e]);
    }
    for (std::int64_t i = 0; i < 20; ++i) {
      for (int e = 0; e < (a / t) * d; ++e) {
        ASSERT_NEAR(s.o[i * p.ld_o + e], u.o[i * full.ld_o + h0 * d + e], 1e-12);
      }
    }
  }
}

}  // namespace
}  // namespace suite::kernels

// The MoE layer's host gradient reference (bench/moe/moe_reference_grad.cpp), which checks the
// benchmark's backward: its gradients against central finite differences of its own loss in
// fp64 (directional derivatives along random directions of every input and weight), for both
// MLPs, with dropped copies and an expert nobody keeps; and its per-rank pieces (token and
// expert ranges) against the whole.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/moe/moe_reference_grad.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::moe {
namespace {

using kernels::test::random_vector;

constexpr std::int64_t kTokens = 6;

struct Fixture {
  MoeConfig c;
  std::vector<RefExpert> experts;
  RefLayer layer;
  RefRouting routing;
};

Fixture make(Mlp mlp) {
  Fixture f;
  f.c.h = 5;
  f.c.d_ff = 4;
  f.c.experts = 4;
  f.c.k = 2;
  f.c.mlp = mlp;
  const std::int64_t h = f.c.h, E = f.c.experts;
  for (int e = 0; e < E; ++e)
    f.experts.push_back({random_vector<double>(h * f.c.w1_cols(), 10 + e, -0.8, 0.8),
                         random_vector<double>(f.c.d_ff * h, 20 + e, -0.8, 0.8)});
  f.layer.c = f.c;
  f.layer.tokens = kTokens;
  f.layer.x = random_vector<double>(kTokens * h, 1);
  f.layer.dy = random_vector<double>(kTokens * h, 2);
  f.layer.w_router = random_vector<double>(h * E, 3);
  f.layer.logit_bias = random_vector<double>(E, 4, -0.5, 0.5);
  // Two different experts per token; expert 3 chosen once and dropped; two more drops.
  f.routing.chosen = {0, 1, 2, 0, 1, 2, 3, 0, 0, 2, 1, 0};
  f.routing.keep = {1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1};
  return f;
}

// The fixture's layer with every input and weight moved by eps along v.
struct Direction {
  std::vector<double> x, w_router;
  std::vector<RefExpert> experts;
};

Direction random_direction(const Fixture& f, std::uint64_t seed) {
  Direction v{random_vector<double>(f.layer.x.size(), seed),
              random_vector<double>(f.layer.w_router.size(), seed + 1),
              {}};
  for (std::size_t e = 0; e < f.experts.size(); ++e)
    v.experts.push_back({random_vector<double>(f.experts[e].w1.size(), seed + 2 + 2 * e),
                         random_vector<double>(f.experts[e].w2.size(), seed + 3 + 2 * e)});
  return v;
}

void axpy(double a, const std::vector<double>& x, std::vector<double>& y) {
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] += a * x[i];
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

double moved_loss(const Fixture& f, const Direction& v, double eps) {
  RefLayer l = f.layer;
  axpy(eps, v.x, l.x);
  axpy(eps, v.w_router, l.w_router);
  std::vector<RefExpert> experts = f.experts;
  for (std::size_t e = 0; e < experts.size(); ++e) {
    axpy(eps, v.experts[e].w1, experts[e].w1);
    axpy(eps, v.experts[e].w2, experts[e].w2);
  }
  l.expert = [&experts](int e) { return experts[static_cast<std::size_t>(e)]; };
  return ref_loss(l, f.routing, routed_fractions(f.routing, f.c.experts));
}

class MoeReferenceGrad : public ::testing::TestWithParam<Mlp> {};

TEST_P(MoeReferenceGrad, IsTheDirectionalDerivativeOfTheLoss) {
  Fixture f = make(GetParam());
  f.layer.expert = [&f](int e) { return f.experts[static_cast<std::size_t>(e)]; };
  const RefGrads g = ref_grads(f.layer, f.routing, routed_fractions(f.routing, f.c.experts), 0,
                               kTokens, 0, f.c.experts);
  ASSERT_EQ(g.dw.size(), f.experts.size());
  for (std::uint64_t seed : {100, 200, 300}) {
    const Direction v = random_direction(f, seed);
    double directional = dot(g.dx, v.x) + dot(g.dw_router, v.w_router);
    for (std::size_t e = 0; e < f.experts.size(); ++e)
      directional += dot(g.dw[e].w1, v.experts[e].w1) + dot(g.dw[e].w2, v.experts[e].w2);
    const double eps = 1e-5;
    const double fd = (moved_loss(f, v, eps) - moved_loss(f, v, -eps)) / (2 * eps);
    EXPECT_NEAR(directional, fd, 1e-8 * std::max(1.0, std::fabs(fd))) << "direction " << seed;
  }
}

TEST_P(MoeReferenceGrad, AuxLossAloneHasTheSwitchGradient) {
  // With dY = 0 only alpha E sum f_i P_i remains: dz_te = alpha E / N * p_te (f_e - sum_j p_tj
  // f_j).
  Fixture f = make(GetParam());
  f.layer.expert = [&f](int e) { return f.experts[static_cast<std::size_t>(e)]; };
  std::fill(f.layer.dy.begin(), f.layer.dy.end(), 0.0);
  const auto frac = routed_fractions(f.routing, f.c.experts);
  const RefGrads g = ref_grads(f.layer, f.routing, frac, 0, kTokens, 0, f.c.experts);
  const std::int64_t h = f.c.h, E = f.c.experts;
  std::vector<double> want(h * E, 0.0);
  for (std::int64_t t = 0; t < kTokens; ++t) {
    std::vector<double> p(E);
    double sum = 0, pf = 0;
    for (std::int64_t e = 0; e < E; ++e) {
      double z = f.layer.logit_bias[e];
      for (std::int64_t a = 0; a < h; ++a)
        z += f.layer.x[t * h + a] * f.layer.w_router[a * E + e];
      sum += p[e] = std::exp(z);
    }
    for (std::int64_t e = 0; e < E; ++e)
      pf += (p[e] /= sum) * frac[e];
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t a = 0; a < h; ++a)
        want[a * E + e] +=
            f.layer.x[t * h + a] * kAuxLossAlpha * E / kTokens * p[e] * (frac[e] - pf);
  }
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(g.dw_router[i], want[i], 1e-15) << i;
  for (double d : g.dgate)
    EXPECT_EQ(d, 0.0);
}

TEST_P(MoeReferenceGrad, RankPiecesMakeTheWholeAndDropsCarryNothing) {
  Fixture f = make(GetParam());
  f.layer.expert = [&f](int e) { return f.experts[static_cast<std::size_t>(e)]; };
  const auto frac = routed_fractions(f.routing, f.c.experts);
  const RefGrads all = ref_grads(f.layer, f.routing, frac, 0, kTokens, 0, f.c.experts);
  // Two "ranks": tokens [0, 3) with experts {0, 1}, tokens [3, 6) with experts {2, 3}.
  const RefGrads a = ref_grads(f.layer, f.routing, frac, 0, 3, 0, 2),
                 b = ref_grads(f.layer, f.routing, frac, 3, kTokens, 2, 4);
  const std::int64_t h = f.c.h, k = f.c.k;
  for (std::int64_t i = 0; i < kTokens * h; ++i)
    EXPECT_DOUBLE_EQ(all.dx[i], i < 3 * h ? a.dx[i] : b.dx[i - 3 * h]) << i;
  for (std::int64_t i = 0; i < kTokens * k; ++i)
    EXPECT_DOUBLE_EQ(all.dgate[i], i < 3 * k ? a.dgate[i] : b.dgate[i - 3 * k]) << i;
  for (std::size_t i = 0; i < all.dw_router.size(); ++i)
    EXPECT_NEAR(all.dw_router[i], a.dw_router[i] + b.dw_router[i], 1e-14) << i;
  for (int e = 0; e < f.c.experts; ++e) {
    const RefExpert& piece = e < 2 ? a.dw[e] : b.dw[e - 2];
    EXPECT_EQ(piece.w1, all.dw[e].w1) << "expert " << e;
    EXPECT_EQ(piece.w2, all.dw[e].w2) << "expert " << e;
  }
  // Dropped copies: no gate gradient; expert 3's only copy was dropped: no weight gradient.
  for (std::int64_t i = 0; i < kTokens * k; ++i)
    if (!f.routing.keep[i]) {
      EXPECT_EQ(all.dgate[i], 0.0) << "copy " << i;
    }
  for (double w : all.dw[3].w1)
    EXPECT_EQ(w, 0.0);
  for (double w : all.dw[3].w2)
    EXPECT_EQ(w, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Mlp, MoeReferenceGrad, ::testing::Values(Mlp::swiglu, Mlp::gelu),
                         [](const auto& info) { return std::string(mlp_name(info.param)); });

}  // namespace
}  // namespace suite::moe

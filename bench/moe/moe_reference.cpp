#include "bench/moe/moe_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/device/typed_host.hpp"
#include "kernels/core/dtype.hpp"
#include "kernels/moe/moe_cpu.hpp"
#include "kernels/moe/moe_index.hpp"
#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/silu.hpp"

namespace suite::moe {
namespace {

namespace km = kernels::moe;

// The values the device holds: generated in double, rounded to the run's type.
std::vector<double> rounded(std::vector<double> v, DType t) {
  auto bytes = encode(v, t);
  return decode(bytes.data(), v.size(), t);
}

// Per token: router probabilities p (softmax of rounded logits + skew bias), in double.
std::vector<double> reference_probs(const MoeConfig& c, std::int64_t first_token) {
  const std::int64_t T = c.tokens, h = c.h, E = c.experts;
  const auto x = device_values(c, Tensor::input, 0, first_token, T, h);
  const auto w = device_values(c, Tensor::router, 0, 0, h, E);
  const auto bias = skew_logit_bias(c);
  std::vector<double> p(static_cast<std::size_t>(T * E));
  for (std::int64_t t = 0; t < T; ++t) {
    double* pt = p.data() + t * E;
    for (std::int64_t e = 0; e < E; ++e) {
      double z = 0;
      for (std::int64_t i = 0; i < h; ++i)
        z += x[t * h + i] * w[i * E + e];
      pt[e] = z + bias[e];
    }
    const double zmax = *std::max_element(pt, pt + E);
    double sum = 0;
    for (std::int64_t e = 0; e < E; ++e)
      sum += (pt[e] = std::exp(pt[e] - zmax));
    for (std::int64_t e = 0; e < E; ++e)
      pt[e] /= sum;
  }
  return p;
}

// Node-limited routing, written again here (not with the kernels' helper): per node, the sum
// of its best max(1, k / M) scores. Groups clearly inside the best M (above the M-th sum by more
// than tol) must be allowed, those clearly below must not; ties within tol may go either way.
struct AllowedNodes {
  std::vector<int> state;  // per node: 1 inside, 0 within tol of the M-th, -1 outside
};
AllowedNodes allowed_nodes(const MoeConfig& c, const std::vector<double>& score, double tol) {
  const int nodes = c.nodes(), per_node = c.experts / nodes, M = c.max_nodes_per_token;
  const int best = std::max(1, c.k / M);
  std::vector<double> sums;
  for (int n = 0; n < nodes; ++n) {
    std::vector<double> s(score.begin() + n * per_node, score.begin() + (n + 1) * per_node);
    std::sort(s.rbegin(), s.rend());
    double sum = 0;
    for (int i = 0; i < best; ++i)
      sum += s[static_cast<std::size_t>(i)];
    sums.push_back(sum);
  }
  std::vector<double> sorted = sums;
  std::sort(sorted.rbegin(), sorted.rend());
  const double mth = sorted[static_cast<std::size_t>(M - 1)];
  AllowedNodes a;
  for (double v : sums)
    a.state.push_back(v > mth + tol ? 1 : v < mth - tol ? -1 : 0);
  return a;
}

// Whether token t's choice is a valid top-k of the reference scores (within tol), on at most
// M nodes chosen by the rule above when the routing is node-limited, and its gates are the
// reference probabilities renormalised over that choice.
bool routing_ok(const MoeConfig& c, const double* p, const std::vector<float>& select_bias,
                const std::int32_t* chosen, const float* gates, double tol) {
  std::vector<bool> picked(static_cast<std::size_t>(c.experts), false);
  std::vector<double> score(static_cast<std::size_t>(c.experts));
  for (int e = 0; e < c.experts; ++e)
    score[static_cast<std::size_t>(e)] = p[e] + select_bias[static_cast<std::size_t>(e)];
  double lowest_chosen = INFINITY, sum = 0;
  for (int s = 0; s < c.k; ++s) {
    const int e = chosen[s];
    if (e < 0 || e >= c.experts || picked[static_cast<std::size_t>(e)]) return false;
    picked[static_cast<std::size_t>(e)] = true;
    lowest_chosen = std::min(lowest_chosen, score[static_cast<std::size_t>(e)]);
    sum += p[e];
  }
  // The experts an unpicked one must not beat: all, or those of the nodes the token may use.
  std::vector<bool> candidate(static_cast<std::size_t>(c.experts), true);
  if (c.max_nodes_per_token > 0) {
    const int per_node = c.experts / c.nodes();
    const AllowedNodes a = allowed_nodes(c, score, tol);
    std::vector<bool> used(static_cast<std::size_t>(c.nodes()), false);
    for (int s = 0; s < c.k; ++s) {
      const int n = chosen[s] / per_node;
      if (a.state[static_cast<std::size_t>(n)] < 0) return false;  // a node outside the best M
      used[static_cast<std::size_t>(n)] = true;
    }
    if (std::count(used.begin(), used.end(), true) > c.max_nodes_per_token) return false;
    for (int e = 0; e < c.experts; ++e) {
      const auto n = static_cast<std::size_t>(e / per_node);
      candidate[static_cast<std::size_t>(e)] = a.state[n] > 0 || used[n];
    }
  }
  for (int e = 0; e < c.experts; ++e)
    if (!picked[static_cast<std::size_t>(e)] && candidate[static_cast<std::size_t>(e)] &&
        score[static_cast<std::size_t>(e)] > lowest_chosen + tol)
      return false;
  // Gates are stored as fp32 whatever the run's type: allow their rounding.
  const double gate_tol = std::max(tol, 1e-6);
  for (int s = 0; s < c.k; ++s)
    if (std::fabs(gates[s] - p[chosen[s]] / sum) > gate_tol) return false;
  return true;
}

// Output of this rank's tokens: sum over kept copies of gate * expert MLP(x), expert by expert.
std::vector<double> reference_output(const MoeConfig& c, std::int64_t first_token,
                                     const std::int32_t* chosen, const float* gates,
                                     const std::uint8_t* keep) {
  const std::int64_t T = c.tokens, h = c.h, d_ff = c.d_ff, w1c = c.w1_cols();
  const auto x = device_values(c, Tensor::input, 0, first_token, T, h);
  std::vector<double> out(static_cast<std::size_t>(T * h), 0.0), hidden(w1c), act(d_ff), y(h);
  for (int e = 0; e < c.experts; ++e) {
    bool used = false;
    for (std::int64_t i = 0; i < T * c.k && !used; ++i)
      used = keep[i] && chosen[i] == e;
    if (!used) continue;
    const auto w1 = device_values(c, Tensor::w1, e, 0, h, w1c);
    const auto w2 = device_values(c, Tensor::w2, e, 0, d_ff, h);
    for (std::int64_t t = 0; t < T; ++t) {
      for (int s = 0; s < c.k; ++s) {
        const std::int64_t i = km::copy_index(t, s, c.k);
        if (!keep[i] || chosen[i] != e) continue;
        reference_mlp_row(c, w1.data(), w2.data(), x.data() + t * h, hidden.data(), act.data(),
                          y.data());
        for (std::int64_t a = 0; a < h; ++a)
          out[t * h + a] += gates[i] * y[a];
      }
    }
  }
  return out;
}

}  // namespace

std::vector<double> device_values(const MoeConfig& c, Tensor t, std::int64_t index, std::int64_t r0,
                                  std::int64_t rows, std::int64_t cols) {
  return rounded(init_block(c, t, index, r0, rows, cols), c.dtype);
}

void reference_mlp_row(const MoeConfig& c, const double* w1, const double* w2, const double* x,
                       double* hidden, double* act, double* y) {
  const std::int64_t h = c.h, d_ff = c.d_ff, w1c = c.w1_cols();
  std::fill(hidden, hidden + w1c, 0.0);
  for (std::int64_t a = 0; a < h; ++a)
    for (std::int64_t b = 0; b < w1c; ++b)
      hidden[b] += x[a] * w1[a * w1c + b];
  for (std::int64_t b = 0; b < d_ff; ++b)
    act[b] = c.mlp == Mlp::swiglu ? kernels::silu(hidden[b]) * hidden[d_ff + b]
                                  : kernels::gelu_tanh(hidden[b]);
  std::fill(y, y + h, 0.0);
  for (std::int64_t b = 0; b < d_ff; ++b)
    for (std::int64_t a = 0; a < h; ++a)
      y[a] += act[b] * w2[b * h + a];
}

double output_tolerance(DType t) {
  return PerDType{.fp32 = 2e-4, .fp64 = 1e-9, .bf16 = 5e-2}.at(t);
}

double routing_tolerance(DType t) {
  return PerDType{.fp32 = 1e-5, .fp64 = 1e-9, .bf16 = 3e-2}.at(t);
}

bool reference_too_large(const MoeConfig& c, std::string& why) {
  const double weights = static_cast<double>(c.experts) * c.h * (c.w1_cols() + c.d_ff);
  // The gradient reference runs each copy forward and backward (3x), for this rank's tokens
  // and for the copies its experts received (about as many again), and holds the group's rows.
  const double flops =
      (c.backward() ? 6.0 : 1.0) * 2.0 * c.tokens * c.k * c.h * (c.w1_cols() + c.d_ff);
  const double rows = c.backward() ? 2.0 * c.tokens * c.n_e * c.h : 0.0;
  if (weights <= 2e8 && flops <= 2e10 && rows <= 1e8) return false;
  char text[240];
  std::snprintf(text, sizeof text,
                "the host reference would generate %.3g weights, run %.3g FLOPs and hold %.3g "
                "group row elements per rank (limits 2e8, 2e10 and 1e8); check a smaller case",
                weights, flops, rows);
  why = text;
  return true;
}

ReferenceOutcome check_against_reference(const MoeConfig& c, int group_rank,
                                         std::int64_t first_token,
                                         const std::vector<float>& select_bias,
                                         const GroupRouting& routing,
                                         const std::vector<double>& output) {
  ReferenceOutcome out;
  const std::int64_t copies = c.tokens * c.k, offset = group_rank * copies;
  // 1. The drop rule, re-applied to the whole group's routing.
  std::vector<std::uint8_t> keep(routing.chosen.size());
  km::capacity_keep(static_cast<std::int64_t>(keep.size()), routing.chosen.data(),
                    routing.gates.data(), c.experts,
                    km::expert_capacity(c.capacity_factor, c.k, c.tokens * c.n_e, c.experts),
                    keep.data());
  for (std::size_t i = 0; i < keep.size(); ++i)
    out.keep_errors += keep[i] != routing.keep[i];
  // 2. This rank's routing against the reference router.
  const auto p = reference_probs(c, first_token);
  const double rtol = routing_tolerance(c.dtype);
  for (std::int64_t t = 0; t < c.tokens; ++t)
    out.routing_errors += !routing_ok(c, p.data() + t * c.experts, select_bias,
                                      routing.chosen.data() + offset + t * c.k,
                                      routing.gates.data() + offset + t * c.k, rtol);
  // 3. The output with the device's routing (drops included).
  const auto ref = reference_output(c, first_token, routing.chosen.data() + offset,
                                    routing.gates.data() + offset, routing.keep.data() + offset);
  double scale = 1;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    const double err = std::fabs(output[i] - ref[i]);
    if (!(err <= out.max_abs_err)) out.max_abs_err = std::isnan(err) ? INFINITY : err;
  }
  const double tol = output_tolerance(c.dtype) * scale;
  out.passed = out.keep_errors == 0 && out.routing_errors == 0 && out.max_abs_err <= tol;
  if (out.keep_errors)
    out.detail = std::to_string(out.keep_errors) + " drop decisions differ from the rule; ";
  if (out.routing_errors)
    out.detail += std::to_string(out.routing_errors) + " tokens routed unlike the reference; ";
  if (out.max_abs_err > tol)
    out.detail += "output differs from the reference by " + std::to_string(out.max_abs_err) +
                  " (tolerance " + std::to_string(tol) + ")";
  return out;
}

}  // namespace suite::moe

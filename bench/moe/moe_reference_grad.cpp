#include "bench/moe/moe_reference_grad.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace suite::moe {
namespace {

// Router probabilities of the N tokens: softmax of x W_router + bias, [N, E].
std::vector<double> probabilities(const RefLayer& l) {
  const std::int64_t h = l.c.h, E = l.c.experts;
  std::vector<double> p(static_cast<std::size_t>(l.tokens * E));
  for (std::int64_t t = 0; t < l.tokens; ++t) {
    double* pt = p.data() + t * E;
    for (std::int64_t e = 0; e < E; ++e) {
      pt[e] = l.logit_bias[e];
      for (std::int64_t a = 0; a < h; ++a)
        pt[e] += l.x[t * h + a] * l.w_router[a * E + e];
    }
    const double top = *std::max_element(pt, pt + E);
    double sum = 0;
    for (std::int64_t e = 0; e < E; ++e)
      sum += pt[e] = std::exp(pt[e] - top);
    for (std::int64_t e = 0; e < E; ++e)
      pt[e] /= sum;
  }
  return p;
}

// Sum of the chosen experts' probabilities of token t (the gates' denominator).
double chosen_sum(const RefLayer& l, const RefRouting& r, const std::vector<double>& p,
                  std::int64_t t) {
  double s = 0;
  for (int j = 0; j < l.c.k; ++j)
    s += p[t * l.c.experts + r.chosen[t * l.c.k + j]];
  return s;
}

// d/dz of the activation, written from its definition rather than shared with the kernels:
// silu(z) = z sigma(z); gelu(z) = z/2 (1 + tanh(u(z))), tanh' = 1/cosh^2.
double silu_derivative(double z) {
  const double sigma = 1 / (1 + std::exp(-z));
  return sigma + z * sigma * (1 - sigma);
}
double gelu_derivative(double z) {
  const double c0 = std::sqrt(2 / M_PI), c1 = 0.044715;
  const double u = c0 * (z + c1 * z * z * z), du = c0 * (1 + 3 * c1 * z * z);
  const double ch = std::cosh(u);
  return 0.5 * (1 + std::tanh(u)) + 0.5 * z * du / (ch * ch);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

// Whether the largest |got - want| (NaN counts as infinite) is within tol * max(1, max
// |want|); raises `worst` to it.
bool compare(const std::vector<double>& got, const std::vector<double>& want, double tol,
             double& worst) {
  double err = got.size() == want.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    if (!(d <= err)) err = std::isnan(d) ? INFINITY : d;
  }
  worst = std::max(worst, err);
  return err <= tol * std::max(1.0, max_abs(want));
}

}  // namespace

std::vector<double> routed_fractions(const RefRouting& r, int experts) {
  std::vector<double> f(static_cast<std::size_t>(experts), 0.0);
  for (auto e : r.chosen)
    f[static_cast<std::size_t>(e)] += 1.0 / static_cast<double>(r.chosen.size());
  return f;
}

double ref_loss(const RefLayer& l, const RefRouting& r, const std::vector<double>& f) {
  const MoeConfig& c = l.c;
  const std::int64_t h = c.h, E = c.experts;
  const auto p = probabilities(l);
  double loss = 0;
  for (std::int64_t t = 0; t < l.tokens; ++t)
    for (std::int64_t e = 0; e < E; ++e)
      loss += kAuxLossAlpha * static_cast<double>(E) * f[e] * p[t * E + e] /
              static_cast<double>(l.tokens);
  std::vector<double> hidden(c.w1_cols()), act(c.d_ff), y(h);
  for (int e = 0; e < c.experts; ++e) {
    RefExpert w;
    for (std::int64_t i = 0; i < l.tokens * c.k; ++i) {
      if (r.chosen[i] != e || !r.keep[i]) continue;
      if (w.w1.empty()) w = l.expert(e);
      const std::int64_t t = i / c.k;
      reference_mlp_row(c, w.w1.data(), w.w2.data(), l.x.data() + t * h, hidden.data(), act.data(),
                        y.data());
      const double gate = p[t * E + e] / chosen_sum(l, r, p, t);
      for (std::int64_t a = 0; a < h; ++a)
        loss += gate * l.dy[t * h + a] * y[a];
    }
  }
  return loss;
}

RefGrads ref_grads(const RefLayer& l, const RefRouting& r, const std::vector<double>& f,
                   std::int64_t t0, std::int64_t t1, int e0, int e1) {
  const MoeConfig& c = l.c;
  const std::int64_t h = c.h, E = c.experts, d_ff = c.d_ff, w1c = c.w1_cols(), k = c.k;
  const auto p = probabilities(l);
  RefGrads g;
  g.dx.assign(static_cast<std::size_t>((t1 - t0) * h), 0.0);
  g.dw_router.assign(static_cast<std::size_t>(h * E), 0.0);
  g.dgate.assign(static_cast<std::size_t>((t1 - t0) * k), 0.0);
  std::vector<double> hidden(w1c), act(d_ff), y(h), dy(h), dact(d_ff), dhidden(w1c);
  // The expert path, expert by expert: every kept copy whose token or expert is in range.
  for (int e = 0; e < c.experts; ++e) {
    const bool mine = e >= e0 && e < e1;
    RefExpert w, dw;
    if (mine) dw = {std::vector<double>(h * w1c, 0.0), std::vector<double>(d_ff * h, 0.0)};
    for (std::int64_t i = 0; i < l.tokens * k; ++i) {
      const std::int64_t t = i / k;
      const bool token_here = t >= t0 && t < t1;
      if (r.chosen[i] != e || !r.keep[i] || !(mine || token_here)) continue;
      if (w.w1.empty()) w = l.expert(e);
      const double* x = l.x.data() + t * h;
      reference_mlp_row(c, w.w1.data(), w.w2.data(), x, hidden.data(), act.data(), y.data());
      const double gate = p[t * E + e] / chosen_sum(l, r, p, t);
      for (std::int64_t a = 0; a < h; ++a)
        dy[a] = gate * l.dy[t * h + a];
      for (std::int64_t b = 0; b < d_ff; ++b) {
        dact[b] = 0;
        for (std::int64_t a = 0; a < h; ++a) {
          dact[b] += w.w2[b * h + a] * dy[a];
          if (mine) dw.w2[b * h + a] += act[b] * dy[a];
        }
      }
      for (std::int64_t b = 0; b < d_ff; ++b) {
        if (c.mlp == Mlp::swiglu) {  // act = silu(gate half) * up half
          const double z = hidden[b], up = hidden[d_ff + b];
          dhidden[b] = dact[b] * up * silu_derivative(z);
          dhidden[d_ff + b] = dact[b] * z / (1 + std::exp(-z));
        } else {
          dhidden[b] = dact[b] * gelu_derivative(hidden[b]);
        }
      }
      for (std::int64_t a = 0; a < h; ++a)
        for (std::int64_t b = 0; b < w1c; ++b) {
          if (mine) dw.w1[a * w1c + b] += x[a] * dhidden[b];
          if (token_here) g.dx[(t - t0) * h + a] += w.w1[a * w1c + b] * dhidden[b];
        }
      if (token_here)
        for (std::int64_t a = 0; a < h; ++a)
          g.dgate[i - t0 * k] += l.dy[t * h + a] * y[a];
    }
    if (mine) g.dw.push_back(std::move(dw));
  }
  // The router path of the tokens in range: gates g_j = p_j / S, then the softmax.
  std::vector<double> dp(E), dz(E);
  for (std::int64_t t = t0; t < t1; ++t) {
    const double* pt = p.data() + t * E;
    const double S = chosen_sum(l, r, p, t);
    for (std::int64_t e = 0; e < E; ++e)
      dp[e] = kAuxLossAlpha * static_cast<double>(E) * f[e] / static_cast<double>(l.tokens);
    // dg_j/dp_m = [m = e_j]/S - p_{e_j}/S^2.
    for (std::int64_t j = 0; j < k; ++j) {
      const double dgate = g.dgate[(t - t0) * k + j];
      const int ej = r.chosen[t * k + j];
      dp[ej] += dgate / S;
      for (std::int64_t m = 0; m < k; ++m)
        dp[r.chosen[t * k + m]] -= dgate * pt[ej] / (S * S);
    }
    // dp_e/dz_m = p_e ([e = m] - p_m).
    for (std::int64_t m = 0; m < E; ++m) {
      dz[m] = 0;
      for (std::int64_t e = 0; e < E; ++e)
        dz[m] += dp[e] * pt[e] * ((e == m ? 1.0 : 0.0) - pt[m]);
    }
    for (std::int64_t a = 0; a < h; ++a)
      for (std::int64_t m = 0; m < E; ++m) {
        g.dw_router[a * E + m] += l.x[t * h + a] * dz[m];
        g.dx[(t - t0) * h + a] += l.w_router[a * E + m] * dz[m];
      }
  }
  return g;
}

double GradOutcome::max_abs_err() const {
  return std::max({input_err, weights_err, router_err, gate_err});
}

double grad_tolerance(DType t) {
  // Gates and their gradients are fp32 in every run (as the forward's gates): an fp64 run's
  // gradients carry their rounding, about 1e-7. Otherwise the backward rounds about twice as
  // many intermediates as the forward.
  return t == DType::fp64 ? 1e-6 : 2 * output_tolerance(t);
}

GradOutcome check_gradients(const MoeConfig& c, int group_rank, std::int64_t group_first_token,
                            const GroupRouting& routing, const LayerGrads& got,
                            const std::vector<int>& local_experts) {
  const std::int64_t N = c.tokens * c.n_e, h = c.h, E = c.experts;
  RefLayer l;
  l.c = c;
  l.tokens = N;
  l.x = device_values(c, Tensor::input, 0, group_first_token, N, h);
  l.dy = device_values(c, Tensor::grad_output, 0, group_first_token, N, h);
  l.w_router = device_values(c, Tensor::router, 0, 0, h, E);
  const auto bias = skew_logit_bias(c);
  l.logit_bias.assign(bias.begin(), bias.end());
  l.expert = [&c](int e) {
    return RefExpert{device_values(c, Tensor::w1, e, 0, c.h, c.w1_cols()),
                     device_values(c, Tensor::w2, e, 0, c.d_ff, c.h)};
  };
  const RefRouting r{routing.chosen, routing.keep};
  const std::int64_t t0 = group_rank * c.tokens;
  const int e0 =
      local_experts.empty() ? 0 : *std::min_element(local_experts.begin(), local_experts.end());
  const int e1 =
      local_experts.empty() ? 0 : *std::max_element(local_experts.begin(), local_experts.end()) + 1;
  const RefGrads span = ref_grads(l, r, routed_fractions(r, c.experts), t0, t0 + c.tokens, e0, e1);
  RefGrads want = span;
  want.dw.clear();
  for (int e : local_experts)
    want.dw.push_back(span.dw[static_cast<std::size_t>(e - e0)]);
  GradOutcome out;
  const double tol = grad_tolerance(c.dtype);
  auto note = [&out, tol](bool ok, const char* what, double err) {
    if (ok) return;
    out.passed = false;
    char text[160];
    std::snprintf(text, sizeof text,
                  "%s gradient differs from the reference by %.3g (tolerance %.3g x max(1, "
                  "max |reference|)); ",
                  what, err, tol);
    out.detail += text;
  };
  note(compare(got.dx, want.dx, tol, out.input_err), "input", out.input_err);
  note(compare(got.dw_router, want.dw_router, tol, out.router_err), "router weight",
       out.router_err);
  note(compare(got.dgate, want.dgate, tol, out.gate_err), "gate", out.gate_err);
  bool weights_ok = got.dw1.size() == want.dw.size() && got.dw2.size() == want.dw.size();
  for (std::size_t j = 0; weights_ok && j < want.dw.size(); ++j) {
    weights_ok = compare(got.dw1[j], want.dw[j].w1, tol, out.weights_err) && weights_ok;
    weights_ok = compare(got.dw2[j], want.dw[j].w2, tol, out.weights_err) && weights_ok;
  }
  if (got.dw1.size() != want.dw.size()) out.weights_err = INFINITY;
  note(weights_ok, "expert weight", out.weights_err);
  return out;
}

}  // namespace suite::moe

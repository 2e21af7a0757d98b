// The model executable's inputs and the rules they must follow before any prediction is
// printed: the divisibility rules of METHODS.md that the chosen sections rely on (a % n_kv,
// h % a, a % t, s % t, d_ff % t, s % N_c, s % 2N_c causal, a % N_c or, for a hybrid, N_c % u
// and a % u, E % N_e, 1 <= k <= E).
// Header-only so that the unit tests check the same rules the executable applies.
#pragma once

#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace suite::model_cli {

struct Params {
  double s = 4096, b = 1, h = 4096, a = 32, kv = 32, d_ff = 0;
  int t = 8, n_c = 8, n_e = 8, experts = 64;
  int u = 0;  // Ulysses degree of a Ulysses x ring hybrid; 0: N_c (plain Ulysses)
  double k = 2, tokens = 4096, capacity_factor = 1.25;
  double flops = 989e12, bw = 450e9;
  std::optional<double> flops_bwd;  // F_b, the attention backward kernel's FLOP/s; unset: flops
  std::string dtype = "bf16";
  std::string grad_dtype = "fp32";  // element type of the travelling dK/dV partial sums
  bool causal = false, swiglu = false;
  int layers = 1;
};

namespace detail {

inline std::string num(double v) {
  std::ostringstream o;
  o.precision(15);
  o << v;
  return o.str();
}

constexpr double kMaxSize = 9007199254740992.0;  // 2^53

inline bool whole(double v) {
  return std::isfinite(v) && v == std::floor(v);
}

// a % b == 0 for whole positive a, b held in doubles (exact up to 2^53).
inline bool divides(double b, double a) {
  return std::fmod(a, b) == 0;
}

}  // namespace detail

// Empty when every rule of `section` ("all" = every section) holds; otherwise one message:
// the first bad size or rate, or else every divisibility rule broken (joined by "; "), each
// naming its flags and their values (the executable exits 2 with it).
inline std::string params_error(const Params& p, const std::string& section) {
  using detail::divides;
  using detail::num;
  using detail::whole;
  const bool all = section == "all",
             sp = all || section == "sp" || section == "tp_overlap" || section == "mesh" ||
                  section == "plan",
             ring = all || section == "ring" || section == "mesh",
             ulysses = all || section == "ulysses", moe = all || section == "moe",
             varlen = section == "varlen";
  // Sizes and counts: whole numbers >= 1 (d_ff: 0 means 4h).
  struct Size {
    const char* flag;
    double v;
  };
  for (const Size& x :
       {Size{"--seq", p.s}, Size{"--batch", p.b}, Size{"--hidden", p.h}, Size{"--heads", p.a},
        Size{"--kv-heads", p.kv}, Size{"--top-k", p.k}, Size{"--tokens", p.tokens}})
    if (!whole(x.v) || x.v < 1)
      return std::string(x.flag) + " " + num(x.v) + " must be a whole number >= 1";
    else if (x.v > detail::kMaxSize)
      return std::string(x.flag) + " " + num(x.v) + " is above 2^53 (counts stay exact below)";
  if (!whole(p.d_ff) || p.d_ff < 0)
    return "--d-ff " + num(p.d_ff) + " must be a whole number >= 0 (0: 4h)";
  if (p.d_ff > detail::kMaxSize)
    return "--d-ff " + num(p.d_ff) + " is above 2^53 (counts stay exact below)";
  struct Degree {
    const char* flag;
    int v;
  };
  for (const Degree& x : {Degree{"--tp", p.t}, Degree{"--cp", p.n_c}, Degree{"--ep", p.n_e},
                          Degree{"--experts", p.experts}, Degree{"--layers", p.layers}})
    if (x.v < 1) return std::string(x.flag) + " " + std::to_string(x.v) + " must be >= 1";
  if (p.u < 0)
    return "--ulysses-degree " + std::to_string(p.u) + " must be >= 1 (or 0: plain Ulysses)";
  if (!(p.flops > 0) || !std::isfinite(p.flops)) return "--flops " + num(p.flops) + " must be > 0";
  if (!(p.bw > 0) || !std::isfinite(p.bw)) return "--bw " + num(p.bw) + " must be > 0";
  if (p.flops_bwd && (!(*p.flops_bwd > 0) || !std::isfinite(*p.flops_bwd)))
    return "--flops-bwd " + num(*p.flops_bwd) + " must be > 0 (omit it to use --flops)";
  // Below 1 FLOP/s or 1 B/s no machine runs, and the times would overflow to inf.
  for (const auto& [flag, v] : {std::pair<const char*, double>{"--flops", p.flops},
                                {"--bw", p.bw},
                                {"--flops-bwd", p.flops_bwd.value_or(p.flops)}})
    if (v < 1) return std::string(flag) + " " + num(v) + " must be >= 1 (FLOP/s or bytes/s)";
  if (p.grad_dtype != "bf16" && p.grad_dtype != "fp32" && p.grad_dtype != "fp64")
    return "--grad-dtype " + p.grad_dtype + " must be bf16, fp32 or fp64";
  if (!(p.capacity_factor >= 0) || !std::isfinite(p.capacity_factor))
    return "--capacity-factor " + num(p.capacity_factor) + " must be >= 0";

  std::vector<std::string> broken;  // every divisibility rule broken, in one message
  auto rule = [&broken](bool holds, const std::string& what) {
    if (!holds) broken.push_back(what);
  };
  const std::string a = "--heads " + num(p.a), kv = "--kv-heads " + num(p.kv),
                    s = "--seq " + num(p.s), t = "--tp " + std::to_string(p.t),
                    cp = "--cp " + std::to_string(p.n_c);
  const double d_ff = p.d_ff > 0 ? p.d_ff : 4 * p.h;
  if (sp || ring || ulysses)
    rule(divides(p.a, p.h), "--hidden " + num(p.h) + " is not divisible by " + a +
                                " (head dimension d_h = h/a must be whole)");
  if (ring || ulysses || varlen)
    rule(divides(p.kv, p.a),
         a + " is not divisible by " + kv + " (GQA group g = a/n_kv must be whole)");
  if (ring || ulysses) {
    rule(divides(p.n_c, p.s),
         s + " is not divisible by " + cp + " (each rank holds c = s/N_c tokens: s % N_c == 0)");
  }
  if (sp) {
    rule(divides(p.t, p.a),
         a + " is not divisible by " + t + " (TP splits attention by heads: a % t == 0)");
    rule(divides(p.t, d_ff), "d_ff " + num(d_ff) + (p.d_ff > 0 ? "" : " (4h)") +
                                 " is not divisible by " + t +
                                 " (TP splits the MLP by columns: d_ff % t == 0)");
    rule(divides(p.t, p.s),
         s + " is not divisible by " + t + " (SP shards the sequence: s % t == 0)");
  }
  if (ring && p.causal && divides(p.n_c, p.s))
    rule(divides(2.0 * p.n_c, p.s),
         s + " is not divisible by 2 x " + cp +
             " (--causal: the zig-zag layout cuts 2N_c chunks: s % 2N_c == 0)");
  if (ulysses) {
    const int u = p.u > 0 ? p.u : p.n_c;
    if (p.u > 0) {
      rule(p.n_c % p.u == 0, "--ulysses-degree " + std::to_string(p.u) + " does not divide " + cp +
                                 " (Ulysses groups of u ranks, a ring across N_c/u of them)");
      rule(divides(u, p.a), a + " is not divisible by --ulysses-degree " + std::to_string(u) +
                                " (Ulysses gives each rank a/u whole heads: a % u == 0)");
    } else {
      rule(divides(p.n_c, p.a), a + " is not divisible by " + cp +
                                    " (Ulysses gives each rank a/N_c whole heads: a % N_c == 0; "
                                    "beyond, --ulysses-degree u: Ulysses in groups of u ranks, "
                                    "ring attention across them)");
    }
  }
  if (moe) {
    rule(p.experts % p.n_e == 0, "--experts " + std::to_string(p.experts) +
                                     " is not divisible by --ep " + std::to_string(p.n_e) +
                                     " (each rank holds E/N_e experts: E % N_e == 0)");
    rule(p.k <= p.experts, "--top-k " + num(p.k) + " must be <= --experts " +
                               std::to_string(p.experts) +
                               " (each token picks k different experts)");
  }
  std::string why;
  for (const auto& b : broken)
    why += (why.empty() ? "" : "; ") + b;
  return why;
}

}  // namespace suite::model_cli

// The gradient reference of one MoE layer, in double on the host and independent of the
// kernels it checks (its own loops, its own derivative formulas): for a routing held fixed
// (the top-k choice and the drops, as the backward holds them), the loss
//   L = sum_t <dY_t, out_t> + alpha E sum_i f_i P_i
// of a group's N tokens, with out_t = sum over kept copies of g_ts MLP_e(x_t), g_ts the
// router probability renormalised over the k chosen experts, f_i the routed fraction (held
// constant) and P_i the mean router probability (differentiable); and its gradients.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/moe/moe_config.hpp"
#include "bench/moe/moe_reference.hpp"

namespace suite::moe {

struct RefExpert {
  std::vector<double> w1, w2;  // [h, w1_cols], [d_ff, h]
};

// One group's layer in double. Experts come on demand (one held at a time).
struct RefLayer {
  MoeConfig c;                     // h, d_ff, mlp, experts, k
  std::int64_t tokens = 0;         // N
  std::vector<double> x, dy;       // [N, h]: inputs and the output gradient
  std::vector<double> w_router;    // [h, E]
  std::vector<double> logit_bias;  // [E]
  std::function<RefExpert(int)> expert;
};

struct RefRouting {  // [N, k] in copy order, held fixed
  std::vector<std::int32_t> chosen;
  std::vector<std::uint8_t> keep;
};

// f_i: fraction of the N k copies routed to expert i (before drops).
std::vector<double> routed_fractions(const RefRouting& r, int experts);

double ref_loss(const RefLayer& l, const RefRouting& r, const std::vector<double>& f);

struct RefGrads {
  std::vector<double> dx;         // [t1 - t0, h]
  std::vector<double> dw_router;  // [h, E]: the tokens [t0, t1) only
  std::vector<double> dgate;      // [t1 - t0, k]: dL/dg of each copy (0 when dropped)
  std::vector<RefExpert> dw;      // experts [e0, e1): over all N tokens
};

// Gradients of ref_loss: dx, dgate, dw_router for tokens [t0, t1); dw for experts [e0, e1).
RefGrads ref_grads(const RefLayer& l, const RefRouting& r, const std::vector<double>& f,
                   std::int64_t t0, std::int64_t t1, int e0, int e1);

// What a rank's backward produced (MoeLayer's gradient accessors).
struct LayerGrads {
  std::vector<double> dx, dw_router, dgate;
  std::vector<std::vector<double>> dw1, dw2;  // per local expert
};

struct GradOutcome {
  bool passed = true;
  // Largest absolute error per gradient, and each one's tolerance (relative to max(1, max
  // |reference|) of that gradient).
  double input_err = 0, weights_err = 0, router_err = 0, gate_err = 0;
  double max_abs_err() const;
  std::string detail;
};

double grad_tolerance(DType t);

// This rank's gradients against the reference of its group: the device's routing (gathered,
// group order) held fixed; the group's tokens start at global index group_first_token.
// local_experts: the expert of each of got's weight gradients (its slots, in order).
GradOutcome check_gradients(const MoeConfig& c, int group_rank, std::int64_t group_first_token,
                            const GroupRouting& routing, const LayerGrads& got,
                            const std::vector<int>& local_experts);

}  // namespace suite::moe

// The layer's checks. Forward: the gathered TP+SP output equals TP's. Training step (fwd_bwd):
// the gradients of TP+SP (input and every weight) equal TP's, both computed after a forward
// whose non-ledger buffers were poisoned (NaN), so the ledger alone is shown to suffice; and in
// fp64 a finite-difference directional derivative of the whole layer's loss
// sum(d_output * output), moving every weight and the input along one direction, against
// <gradients, direction>. Collective over the layer's group.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench/sp_tp/layer_ops.hpp"
#include "bench/sp_tp/transformer_layer.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::sp_tp {

struct LayerCheckResult {
  CheckOutcome outcome;
  bool checked = false;  // the other variant ran (not skipped for memory)
  bool output_bit_exact = false;
  // Training step:
  bool grads_checked = false, grads_bit_exact = false;
  // Per gradient tensor: max |tp_sp - tp| / max(1, max |tp|) over the group.
  std::vector<std::pair<std::string, double>> grad_err;
  double grad_max_err = NAN;
  double fd_rel_err = NAN, fd_derivative = NAN, fd_analytic = NAN;
  std::string fd_note;  // why the finite-difference check did not run
};

// Allowed difference between TP+SP and TP (output; gradients relative to their largest value):
// a few rounding units of the type (they differ only in the order of the reductions).
double layer_tolerance(DType t);
// Allowed relative error of the fp64 finite-difference directional derivative.
constexpr double kFdTolerance = 1e-6;
constexpr double kFdStep = 1e-5;

LayerCheckResult check_layer(BenchContext& ctx, TransformerLayer& mine, LayerOps& ops,
                             bool backward, bool overlap);

// The fp64 finite-difference check alone: {relative error, finite difference, analytic}.
// Leaves the layer at its initial point with the gradients of a fresh forward + backward.
struct FdResult {
  double rel_err, derivative, analytic;
};
FdResult finite_difference_check(TransformerLayer& layer, bool overlap, double step = kFdStep);

}  // namespace suite::sp_tp

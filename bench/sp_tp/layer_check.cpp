#include "bench/sp_tp/layer_check.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include "common/harness/errors.hpp"
#include "common/transport/mpi_env.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::sp_tp {
namespace {

// An untimed forward (and backward), the forward's released buffers poisoned.
void run_poisoned(TransformerLayer& layer, bool backward, bool overlap) {
  PhaseTimer scratch(layer.device());
  scratch.begin_step();
  layer.memory().set_poison(true);
  layer.forward(scratch);
  if (backward) layer.backward(scratch, overlap);
  layer.memory().set_poison(false);
  scratch.end_step(false);
}

// {max |a - b|, max |b|} over the group (NaN counts as infinitely far).
std::pair<double, double> group_diff(const std::vector<double>& a, const std::vector<double>& b,
                                     MPI_Comm comm) {
  double v[2] = {0, 0};
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    v[0] = std::isnan(d) ? INFINITY : std::max(v[0], d);
    v[1] = std::max(v[1], std::fabs(b[i]));
  }
  SUITE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, comm));
  return {v[0], v[1]};
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// TP+SP's gradients against TP's: the input gradient (all tokens) and every weight's.
void compare_gradients(TransformerLayer& mine, TransformerLayer& other, LayerCheckResult& r) {
  TransformerLayer& sp = mine.variant() == Variant::tp_sp ? mine : other;
  TransformerLayer& tp = mine.variant() == Variant::tp_sp ? other : mine;
  const double tol = layer_tolerance(mine.config().dtype);
  std::vector<std::pair<std::string, std::pair<double, double>>> diffs;
  diffs.push_back(
      {"input", group_diff(sp.gathered_grad_input(), tp.gathered_grad_input(), mine.mpi_comm())});
  for (std::size_t i = 0; i < mine.slices().size(); ++i)
    diffs.push_back(
        {mine.slices()[i].name, group_diff(sp.param_grad(i), tp.param_grad(i), mine.mpi_comm())});
  r.grads_checked = true;
  r.grads_bit_exact = true;
  r.grad_max_err = 0;
  std::string worst;
  for (const auto& [name, d] : diffs) {
    const double err = d.first / std::max(1.0, d.second);
    r.grad_err.push_back({name, err});
    r.grads_bit_exact = r.grads_bit_exact && d.first == 0;
    if (!(err <= r.grad_max_err)) {
      r.grad_max_err = err;
      worst = name;
    }
  }
  if (!(r.grad_max_err <= tol)) {
    r.outcome.passed = false;
    r.outcome.detail += (r.outcome.detail.empty() ? "" : "; ") + std::string("tp_sp gradient of ") +
                        worst + " differs from tp's by " + num(r.grad_max_err) +
                        " of its largest value (tolerance " + num(tol) + ")";
  }
  r.outcome.max_abs_err = std::max(r.outcome.max_abs_err, r.grad_max_err);
}

}  // namespace

double layer_tolerance(DType t) {
  return PerDType{.fp32 = 1e-4, .fp64 = 1e-10, .bf16 = 6e-2}.at(t);
}

FdResult finite_difference_check(TransformerLayer& layer, bool overlap, double step) {
  run_poisoned(layer, true, overlap);
  const double analytic = layer.directional_derivative();
  PhaseTimer scratch(layer.device());
  auto loss_at = [&](double eps) {
    layer.set_point(eps);
    scratch.begin_step();
    layer.forward(scratch);
    scratch.end_step(false);
    return layer.loss();
  };
  const double plus = loss_at(step), minus = loss_at(-step);
  layer.set_point(0);
  run_poisoned(layer, true, overlap);  // leave the initial point's results behind
  const double fd = (plus - minus) / (2 * step);
  return {std::fabs(fd - analytic) / std::max(std::fabs(analytic), 1e-300), fd, analytic};
}

LayerCheckResult check_layer(BenchContext& ctx, TransformerLayer& mine, LayerOps& ops,
                             bool backward, bool overlap) {
  LayerCheckResult r;
  const LayerConfig& cfg = mine.config();
  const Variant other_v = mine.variant() == Variant::tp ? Variant::tp_sp : Variant::tp;
  // The other variant needs as much device memory again; where any rank lacks it the check is
  // skipped on all ranks together (before any collective), not failed.
  std::unique_ptr<TransformerLayer> other;
  std::optional<std::string> no_memory;
  try {
    other = std::make_unique<TransformerLayer>(cfg, other_v, ctx.device, ctx.comm, ops);
  } catch (const std::exception& e) {
    no_memory = e.what();
  }
  if (auto why = agree_on_error(no_memory)) {
    r.outcome = {true, 0,
                 "no memory for the " + std::string(variant_name(other_v)) + " reference: " + *why,
                 true};
    return r;
  }
  // Both again, the forward's released buffers poisoned: the backward has the ledger only.
  run_poisoned(mine, backward, overlap);
  run_poisoned(*other, backward, overlap);
  const std::vector<double> a = mine.gathered_output(), b = other->gathered_output();
  const auto [diff, scale] = group_diff(a, b, mine.mpi_comm());
  (void)scale;
  r.checked = true;
  r.outcome.max_abs_err = diff;
  r.output_bit_exact = diff == 0;
  const double tol = layer_tolerance(cfg.dtype);
  r.outcome.passed = diff <= tol;
  if (!r.outcome.passed)
    r.outcome.detail =
        "tp_sp output differs from tp output by " + num(diff) + " (tolerance " + num(tol) + ")";
  if (!backward) return r;
  compare_gradients(mine, *other, r);
  other.reset();
  if (cfg.dtype != DType::fp64) {
    r.fd_note = "finite differences run in fp64 only";
    return r;
  }
  const FdResult fd = finite_difference_check(mine, overlap);
  r.fd_rel_err = fd.rel_err;
  r.fd_derivative = fd.derivative;
  r.fd_analytic = fd.analytic;
  if (!(fd.rel_err <= kFdTolerance)) {
    r.outcome.passed = false;
    r.outcome.detail += (r.outcome.detail.empty() ? "" : "; ") +
                        std::string("finite-difference directional derivative ") +
                        num(fd.derivative) + " vs <gradients, direction> " + num(fd.analytic) +
                        ": relative error " + num(fd.rel_err) + " (tolerance " + num(kFdTolerance) +
                        ")";
  }
  return r;
}

}  // namespace suite::sp_tp

#include "bench/ring_attention/ring_case.hpp"

#include <mpi.h>

#include <algorithm>

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ring_attention/global_order.hpp"
#include "bench/ring_attention/ring_case_impl.hpp"
#include "common/harness/errors.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::ring {
namespace {

constexpr std::int64_t kMaxSavedPerRank = 1 << 20;  // elements, as --help says

}  // namespace

void RingCase::step(PhaseTimer& phases) {
  const std::int64_t before = cp_.bytes().sent, got = cp_.bytes().recv;
  if (!cfg_.backward()) {
    ring_->step(Mode::overlapped, /*record_times=*/true);
    fwd_bytes_ = cp_.bytes().sent - before;
    fwd_recv_ = cp_.bytes().recv - got;
    return;
  }
  phases.time("fwd", [&] { ring_->step(Mode::overlapped, true); });
  const std::int64_t mid = cp_.bytes().sent;
  fwd_recv_ = cp_.bytes().recv - got;
  phases.time("bwd", [&] { ring_->backward(Mode::overlapped, true); });
  fwd_bytes_ = mid - before;
  bwd_bytes_ = cp_.bytes().sent - mid;
}

CheckOutcome RingCase::check() {
  auto cmp = compare_with_full_attention(cfg_, ctx_.opts.seed, ring_->segments(),
                                         ring_->positions(), ring_->output(), ring_->lse());
  if (cmp.skipped) return {true, 0, cmp.why_skipped, true};
  CheckOutcome out;
  const double tol = reference_tolerance(cfg_.dtype);
  out.max_abs_err = std::max(cmp.max_err_o, cmp.max_err_lse);
  out.passed = cmp.max_err_o <= tol && cmp.max_err_lse <= tol;
  if (!out.passed)
    out.detail = "differs from full attention: output by " + std::to_string(cmp.max_err_o) +
                 ", lse by " + std::to_string(cmp.max_err_lse) + " (tolerance " +
                 std::to_string(tol) + ")";
  if (!cfg_.backward()) return out;
  grads_ = compare_gradients_with_full_attention(cfg_, ctx_.opts.seed, ring_->positions(),
                                                 ring_->dq(), ring_->dkv());
  if (grads_.skipped) return {true, 0, grads_.why_skipped, true};
  const double gtol = gradient_tolerance(cfg_.dtype, cfg_.grad_dtype);
  if (grads_.max_err() > gtol) {
    out.passed = false;
    out.detail += (out.detail.empty() ? "" : "; ") +
                  std::string(
                      "gradients differ from full attention's (relative to the "
                      "largest value): dQ by ") +
                  std::to_string(grads_.max_err_dq) + ", dK by " +
                  std::to_string(grads_.max_err_dk) + ", dV by " +
                  std::to_string(grads_.max_err_dv) + " (tolerance " + std::to_string(gtol) + ")";
  }
  return out;
}

std::vector<SavedTensor> RingCase::tensors() {
  if (cfg_.c * cfg_.q_row() > kMaxSavedPerRank) return {};
  const int me = cp_.rank();
  const std::int64_t c = cfg_.c, lr = cfg_.batch * cfg_.heads;
  // This rank's lse in token-major [c, batch, heads] order.
  const std::vector<double> lse = ring_->lse();
  std::vector<double> lse_tok(static_cast<std::size_t>(c * lr));
  for (const Segment& s : ring_->segments())
    for (std::int64_t bi = 0; bi < cfg_.batch; ++bi)
      for (int h = 0; h < cfg_.heads; ++h)
        for (std::int64_t i = 0; i < s.count; ++i)
          lse_tok[static_cast<std::size_t>((s.local_offset + i) * lr + bi * cfg_.heads + h)] =
              lse[static_cast<std::size_t>((bi * c + s.local_offset) * cfg_.heads + h * s.count +
                                           i)];
  auto input = [&](InputTensor which, int heads) {
    return stored_input_slice(ctx_.opts.seed, static_cast<int>(which), me, c, cfg_.batch, heads,
                              cfg_.head_dim, cfg_.dtype);
  };
  auto in_order = [&](const std::vector<double>& rows, std::int64_t width) {
    return slice_in_global_order(rows, ring_->positions(), width, me, cfg_.n_c);
  };
  std::vector<SavedTensor> out = {{"q", input(InputTensor::q, cfg_.heads)},
                                  {"k", input(InputTensor::k, cfg_.kv_heads)},
                                  {"v", input(InputTensor::v, cfg_.kv_heads)},
                                  {"o", in_order(ring_->output(), cfg_.q_row())},
                                  {"lse", in_order(lse_tok, lr)}};
  if (!cfg_.backward()) return out;
  const std::vector<double> dkv = ring_->dkv();
  const auto half = static_cast<std::ptrdiff_t>(c * cfg_.kv_row());
  out.push_back({"d_o", input(InputTensor::d_o, cfg_.heads)});
  out.push_back({"dq", in_order(ring_->dq(), cfg_.q_row())});
  out.push_back({"dk", in_order({dkv.begin(), dkv.begin() + half}, cfg_.kv_row())});
  out.push_back({"dv", in_order({dkv.begin() + half, dkv.end()}, cfg_.kv_row())});
  return out;
}

ModeRuns RingCase::run_mode(Mode mode, int iterations, bool backward) {
  ModeRuns out;
  auto timer = ctx_.device.make_timer();
  for (int i = 0; i < ctx_.opts.warmup + iterations; ++i) {
    const bool record = i >= ctx_.opts.warmup;
    if (backward) ring_->step(mode);
    ctx_.device.synchronize();
    SUITE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    timer->start();
    if (backward)
      ring_->backward(mode, record);
    else
      ring_->step(mode, record);
    timer->stop();
    const double t = timer->seconds();
    const double slowest = suite::all_reduce_max(t);
    if (!record) continue;
    out.local.push_back(t);
    out.step.push_back(slowest);
  }
  out.rounds = ring_->collect_times();
  return out;
}

std::unique_ptr<BenchCase> make_ring_case(BenchContext& ctx, const RingConfig& cfg,
                                          kernels::AttnKernelChoice choice) {
  return std::make_unique<RingCase>(ctx, cfg, choice);
}

}  // namespace suite::ring

#include "bench/ring_attention/ring_cases.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ring_attention/global_order.hpp"
#include "bench/ring_attention/ring_attention.hpp"
#include "bench/ring_attention/ring_reference.hpp"
#include "common/attention_select.hpp"
#include "common/device_peak.hpp"
#include "common/errors.hpp"
#include "common/model.hpp"
#include "common/rank_gather.hpp"
#include "common/record_access.hpp"

namespace suite::ring {
namespace {

constexpr std::int64_t kMaxSavedPerRank = 1 << 20;  // elements, as --help says

// Per round, the median over iterations of one series of RoundTimes.
std::vector<double> round_medians(const std::vector<RoundTimes>& runs,
                                  std::vector<double> RoundTimes::*series, int rounds) {
  std::vector<double> out(static_cast<std::size_t>(rounds), 0.0);
  for (int k = 0; k < rounds; ++k) {
    std::vector<double> v;
    for (const auto& r : runs)
      v.push_back((r.*series)[static_cast<std::size_t>(k)]);
    out[static_cast<std::size_t>(k)] = percentile(v, 0.5);
  }
  return out;
}

// One mode's timed runs: per-iteration local times, the same as max over ranks, per-round data.
struct ModeRuns {
  std::vector<double> local, step;
  std::vector<RoundTimes> rounds;
  double median() const { return percentile(step, 0.5); }
};

class RingCase final : public BenchCase {
 public:
  RingCase(BenchContext& ctx, RingConfig cfg, kernels::AttnKernelChoice choice)
      : ctx_(ctx), cp_(ctx.comm), cfg_(cfg), choice_(choice) {}

  void setup() override {
    engine_ = make_attention_engine(ctx_.device, cfg_.dtype, choice_);
    ring_ = std::make_unique<RingAttention>(cfg_, ctx_.device, cp_, *engine_, ctx_.opts.seed);
  }

  void step(PhaseTimer&) override {
    const std::int64_t before = cp_.bytes().sent;
    ring_->step(Mode::overlapped, /*record_times=*/true);  // resolved in report(), untimed
    step_bytes_ = cp_.bytes().sent - before;
  }

  CheckOutcome check() override {
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
    return out;
  }

  void report(const Measurement& m, CaseRecord& rec) override {
    const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank(), R = ring_->rounds();
    std::vector<RoundTimes> timed = ring_->collect_times();  // warm-up steps first
    timed.erase(timed.begin(),
                timed.begin() + std::min<std::ptrdiff_t>(
                                    ctx_.opts.warmup, static_cast<std::ptrdiff_t>(timed.size())));
    ModeRuns compute = run_mode(Mode::compute_only, m.iterations);
    ModeRuns transfer = run_mode(Mode::transfer_only, m.iterations);
    ring_->step(Mode::overlapped);  // leave the method's own output for --save-tensors

    // Work: visible pairs per round on this rank; the busiest rank sets each round's time.
    const std::vector<std::int64_t> work = ring_->work_pairs();
    std::int64_t my_pairs = 0;
    for (auto w : work)
      my_pairs += w;
    const std::vector<std::int64_t> busiest = all_reduce_max(work);
    const std::int64_t max_pairs = all_reduce_max(std::vector<std::int64_t>{my_pairs})[0];
    const double flops_per_pair = 4.0 * cfg_.head_dim * cfg_.heads;
    const double e = static_cast<double>(cfg_.elem());
    const double block_bytes = static_cast<double>(cfg_.kv_block_elems()) * e;
    const double step_bytes = all_reduce_max(std::vector<std::int64_t>{step_bytes_})[0];

    const double t_over = m.step.median, t_comp = compute.median(), t_xfer = transfer.median();
    const double F = flops_per_pair * static_cast<double>(max_pairs) / t_comp;
    const double W = cfg_.n_c > 1 ? step_bytes / t_xfer : NAN;
    const bool balanced = cfg_.causal && cfg_.layout != Layout::contiguous;
    const double g = cfg_.group();
    const double c_star = model::ring_min_block(F, W, g, balanced, e);

    // Prediction of the overlapped step from this run's F and W: each round lasts as long as
    // the busiest rank's attention or the block's transfer, whichever is longer.
    double pred_over = 0, lockstep_pairs = 0;
    for (int k = 0; k < R; ++k) {
      const double tc =
          flops_per_pair * static_cast<double>(busiest[static_cast<std::size_t>(k)]) / F;
      const double tx = cfg_.variant == Variant::ring ? (k < R - 1 ? block_bytes / W : 0.0)
                                                      : (cfg_.n_c - 1) * block_bytes / W;
      pred_over += cfg_.variant == Variant::ring ? std::max(tc, tx) : tc + tx;
      lockstep_pairs += static_cast<double>(busiest[static_cast<std::size_t>(k)]);
    }
    if (cfg_.n_c == 1) pred_over = t_comp;
    const double block_pairs = static_cast<double>(cfg_.c) * cfg_.c * cfg_.batch;
    double pred_lockstep = cfg_.n_c;
    if (cfg_.causal)
      pred_lockstep = balanced ? model::ring_causal_steps_balanced(cfg_.n_c)
                               : model::ring_causal_steps_contiguous(cfg_.n_c);

    model::Ring shape{static_cast<double>(cfg_.heads) * cfg_.head_dim,
                      static_cast<double>(cfg_.c),
                      cfg_.n_c,
                      g,
                      e,
                      cfg_.causal};
    const double pred_mem = cfg_.variant == Variant::ring
                                ? model::ring_memory_bytes(shape) * static_cast<double>(cfg_.batch)
                                : 2.0 * cfg_.c * cfg_.q_row() * e + (1.0 + cfg_.n_c) * block_bytes;
    int done_early = 0;
    for (const auto& t : timed)
      done_early += t.completed_during_compute;
    const double exchanges =
        static_cast<double>(timed.size()) * (cfg_.variant == Variant::ring ? cfg_.n_c - 1 : 0);

    auto& a = rec.attrs;
    a.emplace_back("time_compute_only_median_s", t_comp);
    a.emplace_back("time_transfer_only_median_s", t_xfer);
    a.emplace_back("exposed_comm_s", t_over - t_comp);
    a.emplace_back("overlapped_over_compute_only", t_over / t_comp);
    a.emplace_back("overlap_efficiency",
                   cfg_.n_c > 1 ? std::clamp(1.0 - (t_over - t_comp) / t_xfer, 0.0, 1.0) : NAN);
    a.emplace_back("pred_time_overlapped_s", pred_over);
    a.emplace_back("measured_F_flops", F);
    // Beside the device's peak where the suite knows it (GPUs): an F above it is a bug.
    add_peak_attrs(a, gpu_peak_flops(ctx_.device.name(), cfg_.dtype), {{"measured_F_flops", F}});
    a.emplace_back("measured_W_Bps", W);
    a.emplace_back("c_star_tokens", c_star);
    a.emplace_back("c_over_c_star", cfg_.c / c_star);
    a.emplace_back("c_star_rule",
                   std::string(balanced ? "2F/(gW) * e/2 (causal, balanced)" : "F/(gW) * e/2"));
    a.emplace_back("flops_busiest_rank", flops_per_pair * static_cast<double>(max_pairs));
    a.emplace_back("pred_flops_per_round_full_block",
                   model::ring_flops_per_round(shape) * cfg_.batch);
    a.emplace_back("bytes_per_round", block_bytes);
    a.emplace_back("pred_bytes_per_round", model::ring_bytes_per_round(shape) * cfg_.batch);
    a.emplace_back("bytes_sent_per_rank_per_layer", step_bytes);
    a.emplace_back("pred_bytes_sent_per_rank_per_layer",
                   model::ring_bytes_per_layer(shape) * cfg_.batch);
    a.emplace_back("lockstep_blocks", lockstep_pairs / block_pairs);
    a.emplace_back("pred_lockstep_blocks", pred_lockstep);
    a.emplace_back("memory_method_bytes", static_cast<double>(ring_->method_bytes()));
    a.emplace_back("pred_memory_bytes", pred_mem);
    a.emplace_back("memory_scratch_bytes", static_cast<double>(ring_->scratch_bytes()));
    // Seen only where the host polls the transport (CPU backend); NaN where the GPU overlaps.
    const bool observable = ctx_.backend == Backend::cpu && exchanges > 0;
    a.emplace_back("transfer_done_during_compute_fraction",
                   observable ? done_early / exchanges : NAN);
    a.emplace_back("overlap_mechanism",
                   cp_.overlap_mechanism() + (cfg_.poll_progress || ctx_.backend != Backend::cpu
                                                  ? ""
                                                  : " (polling off: --cpu-progress none)"));
    a.emplace_back("attn_kernel", engine_->name());
    a.emplace_back("attn_library", engine_->library_version());
    a.emplace_back("attn_fallback_blocks",
                   all_reduce_max(std::vector<std::int64_t>{ring_->fallbacks()})[0]);
    a.emplace_back("check_tolerance", reference_tolerance(cfg_.dtype));

    auto table = [&](const char* name, const std::vector<double>& mine, std::size_t rows) {
      rec.tables.push_back(
          {name, rows, static_cast<std::size_t>(ranks), gather_columns(mine, ranks, rank)});
    };
    const auto rows = static_cast<std::size_t>(R);
    table("round_compute_s", round_medians(timed, &RoundTimes::compute_s, R), rows);
    table("round_wait_s", round_medians(timed, &RoundTimes::wait_s, R), rows);
    table("round_transfer_s", round_medians(timed, &RoundTimes::transfer_s, R), rows);
    table("compute_only_round_s", round_medians(compute.rounds, &RoundTimes::compute_s, R), rows);
    table("compute_only_time_s", compute.local, compute.local.size());
    table("transfer_only_time_s", transfer.local, transfer.local.size());
    rec.int_tables.push_back({"round_work_pairs", rows, static_cast<std::size_t>(ranks),
                              gather_int_columns(work, ranks, rank)});
    rec.int_tables.push_back({"cp_bytes_sent", 1, static_cast<std::size_t>(ranks),
                              gather_int(step_bytes_, ranks, rank)});
  }

  // Q, K, V, O and lse of this rank's share of the sequence in global token order: the file's
  // [ranks, n] rows, read in rank order within a group, are the sequence from token 0.
  std::vector<SavedTensor> tensors() override {
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
    return {{"q", input(InputTensor::q, cfg_.heads)},
            {"k", input(InputTensor::k, cfg_.kv_heads)},
            {"v", input(InputTensor::v, cfg_.kv_heads)},
            {"o", slice_in_global_order(ring_->output(), ring_->positions(), cfg_.q_row(), me,
                                        cfg_.n_c)},
            {"lse", slice_in_global_order(lse_tok, ring_->positions(), lr, me, cfg_.n_c)}};
  }

 private:
  ModeRuns run_mode(Mode mode, int iterations) {
    ModeRuns out;
    auto timer = ctx_.device.make_timer();
    for (int i = 0; i < ctx_.opts.warmup + iterations; ++i) {
      ctx_.device.synchronize();
      SUITE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      timer->start();
      ring_->step(mode, /*record_times=*/i >= ctx_.opts.warmup);
      timer->stop();
      const double t = timer->seconds();
      const double slowest = suite::all_reduce_max(t);
      if (i < ctx_.opts.warmup) continue;
      out.local.push_back(t);
      out.step.push_back(slowest);
    }
    out.rounds = ring_->collect_times();
    return out;
  }

  BenchContext& ctx_;
  Comm& cp_;  // the context-parallel group: ctx.comm (BenchDefinition::group_size)
  RingConfig cfg_;
  kernels::AttnKernelChoice choice_;
  std::unique_ptr<kernels::AttentionEngine> engine_;
  std::unique_ptr<RingAttention> ring_;
  std::int64_t step_bytes_ = 0;
};

}  // namespace

std::vector<CaseSpec> ring_cases(BenchContext& ctx, const RingSweep& sweep) {
  // The context-parallel group is ctx.comm: the job, or its group of --cp consecutive ranks.
  const int world = ctx.mpi.size(), cp = ctx.comm.size();
  make_attention_engine(ctx.device, ctx.dtype, sweep.attn_kernel);  // refuses what cannot run
  std::vector<RingConfig> configs;
  for (Variant variant : sweep.variants)
    for (Layout layout : sweep.layouts)
      for (bool causal : sweep.causal)
        for (std::int64_t c : sweep.blocks) {
          RingConfig cfg;
          cfg.c = c;
          cfg.n_c = cp;
          cfg.layout = layout;
          cfg.variant = variant;
          cfg.causal = causal;
          cfg.heads = sweep.heads;
          cfg.kv_heads = sweep.kv_heads;
          cfg.head_dim = sweep.head_dim;
          cfg.batch = sweep.batch;
          cfg.dtype = ctx.dtype;
          cfg.poll_progress = sweep.poll_progress;
          validate(cfg);
          const std::int64_t need = RingAttention::estimate_bytes(cfg);
          const std::size_t have = ctx.device.memory_available();
          if (static_cast<double>(need) > 0.9 * static_cast<double>(have))
            throw UsageError(cfg.case_name() + " needs about " + std::to_string(need >> 20) +
                             " MiB per rank but only " + std::to_string(have >> 20) +
                             " MiB are available; use a smaller --block, --batch or fewer heads");
          if (static_cast<std::size_t>(cfg.kv_block_elems()) > ctx.comm.max_count())
            throw UsageError(cfg.case_name() + ": a K/V block of " +
                             std::to_string(cfg.kv_block_elems()) +
                             " elements is above this transport's limit of " +
                             std::to_string(ctx.comm.max_count()) + "; use --transport nccl");
          configs.push_back(cfg);
        }
  std::vector<CaseSpec> specs;
  for (const RingConfig& cfg : configs) {
    CaseSpec spec;
    spec.name = cfg.case_name();
    spec.params = {
        {"variant", std::string(variant_name(cfg.variant))},
        {"layout", std::string(layout_name(cfg.layout))},
        {"causal", std::int64_t{cfg.causal ? 1 : 0}},
        {"dtype", std::string(dtype_name(cfg.dtype))},
        {"c", cfg.c},
        {"s", cfg.s()},
        {"n_c", std::int64_t{cfg.n_c}},
        {"cp_groups", std::int64_t{world / cfg.n_c}},
        {"heads", std::int64_t{cfg.heads}},
        {"kv_heads", std::int64_t{cfg.kv_heads}},
        {"head_dim", std::int64_t{cfg.head_dim}},
        {"batch", cfg.batch},
        {"attn_kernel_choice", std::string(kernels::attn_kernel_choice_name(sweep.attn_kernel))}};
    spec.make = [&ctx, cfg, choice = sweep.attn_kernel] {
      return std::make_unique<RingCase>(ctx, cfg, choice);
    };
    spec.console_counters = {"c_star_tokens", "overlap_efficiency"};
    specs.push_back(std::move(spec));
  }
  return specs;
}

void print_ring_table(const std::vector<CaseRecord>& records) {
  if (records.empty()) return;
  std::printf(
      "\nRing attention (median step = max over ranks; F, W measured in this run; c* = the overlap "
      "bound)\n");
  std::printf("%-44s %10s %10s %10s %6s %9s %8s %9s %7s %11s %11s %6s\n", "case", "step_us",
              "comp_us", "xfer_us", "eff", "F_GF/s", "W_GB/s", "c*", "c/c*", "lockstep", "(pred)",
              "check");
  for (const auto& r : records) {
    const double passed = attr_number(r, "check_passed");
    std::printf("%-44s %10.1f %10.1f %10.1f %6.2f %9.2f %8.2f %9.1f %7.1f %11.3f %11.3f %6s\n",
                r.name.c_str(), attr_number(r, "time_median_s") * 1e6,
                attr_number(r, "time_compute_only_median_s") * 1e6,
                attr_number(r, "time_transfer_only_median_s") * 1e6,
                attr_number(r, "overlap_efficiency"), attr_number(r, "measured_F_flops") / 1e9,
                attr_number(r, "measured_W_Bps") / 1e9, attr_number(r, "c_star_tokens"),
                attr_number(r, "c_over_c_star"), attr_number(r, "lockstep_blocks"),
                attr_number(r, "pred_lockstep_blocks"),
                passed == 1  ? "ok"
                : passed < 0 ? "off"
                             : "FAIL");
  }
}

}  // namespace suite::ring

#include "bench/ring_attention/ring_case.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "bench/ring_attention/attention_inputs.hpp"
#include "bench/ring_attention/doc_report.hpp"
#include "bench/ring_attention/global_order.hpp"
#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_attention.hpp"
#include "bench/ring_attention/ring_ideal.hpp"
#include "bench/ring_attention/ring_pass_report.hpp"
#include "bench/ring_attention/ring_reference.hpp"
#include "common/attention_select.hpp"
#include "common/device_peak.hpp"
#include "common/errors.hpp"
#include "common/model.hpp"
#include "common/rank_gather.hpp"
#include "common/sim.hpp"

namespace suite::ring {
namespace {

constexpr std::int64_t kMaxSavedPerRank = 1 << 20;  // elements, as --help says

class RingCase final : public BenchCase {
 public:
  RingCase(BenchContext& ctx, RingConfig cfg, kernels::AttnKernelChoice choice)
      : ctx_(ctx), cp_(ctx.comm), cfg_(cfg), choice_(choice) {}

  void setup() override {
    engine_ = make_attention_engine(ctx_.device, cfg_.dtype, choice_);
    ring_ = std::make_unique<RingAttention>(cfg_, ctx_.device, cp_, *engine_, ctx_.opts.seed);
  }

  // The forward, or the forward then the backward as two phases; per-round times are
  // recorded and resolved in report(), outside the timed region.
  void step(PhaseTimer& phases) override {
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

  void report(const Measurement& m, CaseRecord& rec) override {
    std::vector<RoundTimes> timed = ring_->collect_times();  // warm-up steps first
    const std::size_t per_step = cfg_.backward() ? 2 : 1;
    timed.erase(timed.begin(),
                timed.begin() +
                    std::min(per_step * static_cast<std::size_t>(ctx_.opts.warmup), timed.size()));
    PassRuns fwd, bwd;
    for (auto& t : timed)
      (t.backward ? bwd.timed : fwd.timed).push_back(std::move(t));
    fwd.t_over = cfg_.backward() ? phase(m, "fwd") : m.step.median;
    fwd.bytes_sent = fwd_bytes_;
    fwd.compute = run_mode(Mode::compute_only, m.iterations, false);
    fwd.transfer = run_mode(Mode::transfer_only, m.iterations, false);
    const PassRates f = report_pass(forward_count(), fwd, cfg_.n_c, rec);
    report_forward(f, fwd.timed, rec);
    IdealTimes ideal =
        measure_ideal(cfg_, ctx_.device, *engine_, f.F, cfg_.backward(), kIdealIterations);
    if (!ideal.skipped) {
      rec.attrs.emplace_back("ideal_time_fwd_s", ideal.fwd_s);
      rec.attrs.emplace_back("efficiency_vs_ideal_fwd", ideal.fwd_s / cfg_.n_c / fwd.t_over);
      report_efficiency_factors("", f, cfg_.n_c, ideal.fwd_s, fwd.t_over, rec);
    } else {
      rec.attrs.emplace_back("ideal_note", "skipped: " + ideal.why_skipped);
    }
    if (cfg_.backward()) {
      bwd.t_over = phase(m, "bwd");
      bwd.bytes_sent = bwd_bytes_;
      bwd.compute = run_mode(Mode::compute_only, m.iterations, true);
      bwd.transfer = run_mode(Mode::transfer_only, m.iterations, true);
      const PassRates b = report_pass(backward_count(), bwd, cfg_.n_c, rec);
      report_backward(f, b, rec);
      if (!ideal.skipped) {
        rec.attrs.emplace_back("ideal_time_bwd_s", ideal.bwd_s);
        rec.attrs.emplace_back("efficiency_vs_ideal_bwd", ideal.bwd_s / cfg_.n_c / bwd.t_over);
        report_efficiency_factors("bwd_", b, cfg_.n_c, ideal.bwd_s, bwd.t_over, rec);
        rec.attrs.emplace_back("efficiency_vs_ideal_fwd_bwd",
                               (ideal.fwd_s + ideal.bwd_s) / cfg_.n_c / m.step.median);
      }
    }
    // Leave the method's own results for --save-tensors (only then: a step of N_c rounds is
    // what a simulated run at scale pays for).
    if (!ctx_.opts.save_tensors) return;
    ring_->step(Mode::overlapped);
    if (cfg_.backward()) ring_->backward(Mode::overlapped);
  }

  // Q, K, V, O and lse of this rank's share of the sequence in global token order (with the
  // backward: dO, dQ, dK and dV too): the file's [ranks, n] rows, read in rank order within a
  // group, are the sequence from token 0.
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

 private:
  static double phase(const Measurement& m, const std::string& name) {
    for (const auto& [n, v] : m.phase_median_s)
      if (n == name) return v;
    return NAN;
  }

  double flops_per_pair(double per_d_a) const { return per_d_a * cfg_.head_dim * cfg_.heads; }
  double kv_block_bytes() const {
    return static_cast<double>(cfg_.kv_block_elems()) * static_cast<double>(cfg_.elem());
  }
  double dkv_block_bytes() const {
    return static_cast<double>(cfg_.kv_block_elems()) * static_cast<double>(cfg_.grad_elem());
  }
  // One token's K and V (a group-cast row) in elements of `size` bytes.
  double kv_row_bytes(std::size_t size) const {
    return 2.0 * static_cast<double>(cfg_.kv_row()) * static_cast<double>(size);
  }
  bool balanced() const { return cfg_.causal && cfg_.layout != Layout::contiguous; }
  model::Ring shape() const {
    return {static_cast<double>(cfg_.heads) * cfg_.head_dim,
            static_cast<double>(cfg_.c),
            cfg_.n_c,
            static_cast<double>(cfg_.group()),
            static_cast<double>(cfg_.elem()),
            cfg_.causal};
  }

  // Forward: 4 d a FLOPs per visible pair; the ring moves one K/V block per round but the
  // last, the all-gather variant gathers N_c - 1 blocks before it computes.
  PassCount forward_count() const {
    const bool ring = cfg_.variant != Variant::allgather;
    PassCount c{"", flops_per_pair(4), ring_->work_pairs(), {}, ring};
    if (ring_->group_cast_active()) {  // round k: the rows its source sends this rank
      for (std::int64_t rows : ring_->group_cast_counts().rows_by_round)
        c.round_bytes.push_back(static_cast<double>(rows) * kv_row_bytes(cfg_.elem()));
      return c;
    }
    const int R = ring_->rounds();
    for (int k = 0; k < R; ++k)
      c.round_bytes.push_back(ring ? (k < R - 1 ? kv_block_bytes() : 0.0)
                                   : (cfg_.n_c - 1) * kv_block_bytes());
    return c;
  }

  // Backward: 10 d a FLOPs per visible pair; round k moves the next K/V block (k < N_c - 1)
  // and the partial sums of the block used in round k - 1 (k >= 1); the home hop moves the
  // last partial sums (no work). All-gather: the reduce-scatter of N_c - 1 blocks' partial
  // sums after the compute.
  // Group-cast: round k receives its source's rows and sends their partial sums back; the home
  // round adds what arrived for this rank's rows (no work).
  PassCount backward_count() const {
    PassCount c{
        "bwd_", flops_per_pair(10), ring_->work_pairs(), {}, cfg_.variant != Variant::allgather};
    if (cfg_.variant == Variant::allgather) {
      c.round_bytes = {(cfg_.n_c - 1) * dkv_block_bytes()};
      return c;
    }
    const int n = cfg_.n_c;
    if (ring_->group_cast_active()) {
      const double row = kv_row_bytes(cfg_.elem()) + kv_row_bytes(cfg_.grad_elem());
      for (std::int64_t rows : ring_->group_cast_counts().rows_by_round)
        c.round_bytes.push_back(static_cast<double>(rows) * row);
      c.work.push_back(0);
      c.round_bytes.push_back(0.0);
      return c;
    }
    for (int k = 0; k < n; ++k)
      c.round_bytes.push_back((k < n - 1 ? kv_block_bytes() : 0.0) +
                              (k >= 1 ? dkv_block_bytes() : 0.0));
    if (n > 1) {
      c.work.push_back(0);
      c.round_bytes.push_back(dkv_block_bytes());
    }
    return c;
  }

  // The forward's own figures beyond report_pass: c*, bytes, work balance, memory, overlap.
  void report_forward(const PassRates& f, const std::vector<RoundTimes>& timed, CaseRecord& rec) {
    const double e = static_cast<double>(cfg_.elem()), g = cfg_.group();
    const double c_star = model::ring_min_block(f.F, f.W, g, balanced(), e);
    const std::vector<std::int64_t> busiest = all_reduce_max(ring_->work_pairs());
    double lockstep_pairs = 0;
    for (auto w : busiest)
      lockstep_pairs += static_cast<double>(w);
    const double block_pairs = static_cast<double>(cfg_.c) * cfg_.c * cfg_.batch;
    double pred_lockstep = cfg_.n_c;
    if (cfg_.causal)
      pred_lockstep = balanced() ? model::ring_causal_steps_balanced(cfg_.n_c)
                                 : model::ring_causal_steps_contiguous(cfg_.n_c);
    if (cfg_.docs) pred_lockstep = NAN;  // METHODS.md's closed forms hold for one document
    const double pred_mem =
        ring_->group_cast_active() ? group_cast_prediction().memory
        : cfg_.variant != Variant::allgather
            ? model::ring_memory_bytes(shape()) * static_cast<double>(cfg_.batch)
            : 2.0 * cfg_.c * cfg_.q_row() * e + (1.0 + cfg_.n_c) * kv_block_bytes();
    int done_early = 0;
    for (const auto& t : timed)
      done_early += t.completed_during_compute;
    const bool ring_hops = cfg_.variant != Variant::allgather && !ring_->group_cast_active();
    const double exchanges = static_cast<double>(timed.size()) * (ring_hops ? cfg_.n_c - 1 : 0);
    auto& a = rec.attrs;
    add_peak_attrs(a, gpu_peak_flops(ctx_.device.name(), cfg_.dtype), {{"measured_F_flops", f.F}});
    a.emplace_back("c_star_tokens", c_star);
    a.emplace_back("c_over_c_star", cfg_.c / c_star);
    a.emplace_back("c_star_rule",
                   std::string(balanced() ? "2F/(gW) * e/2 (causal, balanced)" : "F/(gW) * e/2"));
    a.emplace_back("pred_flops_per_round_full_block",
                   model::ring_flops_per_round(shape()) * cfg_.batch);
    a.emplace_back("bytes_per_round", kv_block_bytes());
    a.emplace_back("pred_bytes_per_round", model::ring_bytes_per_round(shape()) * cfg_.batch);
    a.emplace_back("bytes_sent_per_rank_per_layer",
                   static_cast<double>(all_reduce_max(std::vector<std::int64_t>{fwd_bytes_})[0]));
    a.emplace_back("pred_bytes_sent_per_rank_per_layer",
                   ring_->group_cast_active() ? group_cast_prediction().bytes_sent
                                              : model::ring_bytes_per_layer(shape()) * cfg_.batch);
    a.emplace_back("lockstep_blocks", lockstep_pairs / block_pairs);
    a.emplace_back("pred_lockstep_blocks", pred_lockstep);
    // The group-cast's buffers differ by rank: the busiest rank's.
    a.emplace_back("memory_method_bytes",
                   static_cast<double>(
                       ring_->group_cast_active()
                           ? all_reduce_max(std::vector<std::int64_t>{ring_->method_bytes()})[0]
                           : ring_->method_bytes()));
    a.emplace_back("pred_memory_bytes", pred_mem);
    a.emplace_back("memory_scratch_bytes", static_cast<double>(ring_->scratch_bytes()));
    // Seen only where the host polls the transport (CPU backend); NaN where the GPU overlaps.
    const bool observable = ctx_.backend == Backend::cpu && exchanges > 0;
    a.emplace_back("transfer_done_during_compute_fraction",
                   observable ? done_early / exchanges : NAN);
    a.emplace_back("overlap_mechanism", overlap_mechanism());
    a.emplace_back("attn_kernel", engine_->name());
    a.emplace_back("attn_library", engine_->library_version());
    a.emplace_back("attn_fallback_blocks",
                   all_reduce_max(std::vector<std::int64_t>{ring_->fallbacks()})[0]);
    a.emplace_back("check_tolerance", reference_tolerance(cfg_.dtype));
    rec.int_tables.push_back({"cp_bytes_sent", 1, static_cast<std::size_t>(ctx_.mpi.size()),
                              gather_int(fwd_bytes_, ctx_.mpi.size(), ctx_.mpi.rank())});
    report_documents(cfg_, *ring_, ring_->positions(), rec);
    if (cfg_.variant == Variant::groupcast) report_group_cast(rec);
  }

  // The backward's own figures: c*_bwd against the forward's, bytes and hops, memory, the
  // training step's total and the gradient check's errors.
  void report_backward(const PassRates& f, const PassRates& b, CaseRecord& rec) {
    const double e = static_cast<double>(cfg_.elem()), g = cfg_.group();
    const double eg = static_cast<double>(cfg_.grad_elem());
    const double c_star = model::ring_min_block(f.F, f.W, g, balanced(), e);
    const double c_star_b = model::ring_min_block_bwd(b.F, b.W, g, balanced(), e, eg);
    const bool gc = ring_->group_cast_active();
    const bool ring = cfg_.variant != Variant::allgather && !gc;  // the ring's hops
    const double batch = static_cast<double>(cfg_.batch);
    auto& a = rec.attrs;
    add_peak_attrs(a, gpu_peak_flops(ctx_.device.name(), cfg_.dtype),
                   {{"bwd_measured_F_flops", b.F}});
    a.emplace_back("grad_dtype", std::string(dtype_name(cfg_.grad_dtype)));
    a.emplace_back("bwd_c_star_tokens", c_star_b);
    a.emplace_back("c_over_bwd_c_star", cfg_.c / c_star_b);
    a.emplace_back("bwd_c_star_over_c_star", c_star_b / c_star);
    a.emplace_back("bwd_c_star_rule", std::string(balanced() ? "2 (e + e_g) F_b/(5 g W_b) (causal, "
                                                               "balanced)"
                                                             : "(e + e_g) F_b/(5 g W_b)"));
    a.emplace_back("pred_bwd_flops_per_round_full_block",
                   model::ring_bwd_flops_per_round(shape()) * batch);
    a.emplace_back("bwd_bytes_per_round", kv_block_bytes() + dkv_block_bytes());
    a.emplace_back("pred_bwd_bytes_per_round",
                   model::ring_bwd_bytes_per_round(shape(), eg) * batch);
    a.emplace_back("bwd_kv_hops", std::int64_t{ring ? cfg_.n_c - 1 : 0});
    a.emplace_back("bwd_dkv_hops", std::int64_t{ring && cfg_.n_c > 1 ? cfg_.n_c : 0});
    a.emplace_back("bwd_bytes_sent_per_rank_per_layer",
                   static_cast<double>(all_reduce_max(std::vector<std::int64_t>{bwd_bytes_})[0]));
    a.emplace_back("pred_bwd_bytes_sent_per_rank_per_layer",
                   gc     ? group_cast_prediction().bwd_bytes_sent
                   : ring ? model::ring_bwd_bytes_per_layer(shape(), eg) * batch
                          : model::ring_allgather_bwd_bytes_per_layer(
                                static_cast<double>(cfg_.s()), shape().h, cfg_.n_c, g, eg, batch));
    const double pred_mem = gc     ? group_cast_prediction().bwd_memory
                            : ring ? model::ring_bwd_memory_bytes(shape(), eg) * batch
                                   : (3 * e + eg) * cfg_.c * cfg_.q_row() +
                                         cfg_.n_c * kv_block_bytes() +
                                         (cfg_.n_c + 1.0) * dkv_block_bytes();
    a.emplace_back("bwd_memory_method_bytes",
                   static_cast<double>(gc ? all_reduce_max(std::vector<std::int64_t>{
                                                ring_->backward_method_bytes()})[0]
                                          : ring_->backward_method_bytes()));
    a.emplace_back("pred_bwd_memory_bytes", pred_mem);
    a.emplace_back("bwd_memory_scratch_bytes",
                   static_cast<double>(ring_->backward_scratch_bytes()));
    a.emplace_back("grad_check_tolerance", gradient_tolerance(cfg_.dtype, cfg_.grad_dtype));
    if (!grads_.skipped) {
      a.emplace_back("check_err_dq", grads_.max_err_dq);
      a.emplace_back("check_err_dk", grads_.max_err_dk);
      a.emplace_back("check_err_dv", grads_.max_err_dv);
    }
    rec.int_tables.push_back({"bwd_cp_bytes_sent", 1, static_cast<std::size_t>(ctx_.mpi.size()),
                              gather_int(bwd_bytes_, ctx_.mpi.size(), ctx_.mpi.rank())});
  }

  // What the layout and the documents say of the group-cast (rank 0 counts every rank's rows
  // once, as model --section varlen does; the other ranks write no record): the busiest rank's
  // bytes sent in a forward and a backward, and its buffers.
  struct GroupCastPrediction {
    double bytes_sent = NAN, bytes_received = NAN, bwd_bytes_sent = NAN;
    double memory = NAN, bwd_memory = NAN;
    bool falls_back = false;
    std::int64_t rows_received_max = 0;
  };
  const GroupCastPrediction& group_cast_prediction() {
    if (predicted_ || ctx_.mpi.rank() != 0) return prediction_;
    predicted_ = true;
    const GroupCastTraffic t = group_cast_traffic(cfg_);
    const double kv = kv_row_bytes(cfg_.elem()), dkv = kv_row_bytes(cfg_.grad_elem());
    const double e = static_cast<double>(cfg_.elem());
    const double ge = static_cast<double>(dtype_size(engine_->grad_type()));
    const double q_bytes = static_cast<double>(cfg_.c * cfg_.q_row()) * e;
    const double block = kv_block_bytes();
    GroupCastPrediction& p = prediction_;
    p.falls_back = t.falls_back(cfg_.c);
    p.rows_received_max = t.most_received();
    p.bytes_received = static_cast<double>(t.most_received()) * kv;
    p.bytes_sent = static_cast<double>(t.most_sent()) * kv;
    p.bwd_bytes_sent = p.memory = p.bwd_memory = 0;
    for (int r = 0; r < cfg_.n_c; ++r) {
      const auto sent = static_cast<double>(t.sent(r)), got = static_cast<double>(t.received(r));
      const auto slot = static_cast<double>(t.largest_batch(r, cfg_.c));  // rows of one slot
      p.bwd_bytes_sent = std::max(p.bwd_bytes_sent, sent * kv + got * dkv);
      // Q, O, its own K/V, the staging copy of what it sends and two slots.
      const double fwd = 2 * q_bytes + block + sent * kv + 2 * slot * kv;
      p.memory = std::max(p.memory, fwd);
      // The backward also holds dO, dQ, its own block's contributions and total, one slot's
      // contributions, two slots' partial sums leaving and those arriving for its rows.
      p.bwd_memory = std::max(p.bwd_memory, fwd + q_bytes + q_bytes / e * ge + block / e * ge +
                                                block / e * static_cast<double>(cfg_.grad_elem()) +
                                                slot * kv / e * ge + 2 * slot * dkv + sent * dkv);
    }
    return p;
  }

  // The group-cast's own figures: which schedule ran and why, the rows each rank received and
  // sent (counted by the transport, beside the exact figures the layout gives), the ranks it
  // exchanged with, against the ring's bytes.
  void report_group_cast(CaseRecord& rec) {
    const RingAttention::GroupCastCounts n = ring_->group_cast_counts();
    const GroupCastPrediction& p = group_cast_prediction();
    auto& a = rec.attrs;
    const bool on = ring_->group_cast_active();
    a.emplace_back("groupcast_schedule",
                   on ? std::string("groupcast") : "ring: " + ring_->group_cast_fallback());
    a.emplace_back("pred_groupcast_falls_back", std::int64_t{p.falls_back ? 1 : 0});
    a.emplace_back("bytes_recv_per_rank_per_layer",
                   static_cast<double>(all_reduce_max(std::vector<std::int64_t>{fwd_recv_})[0]));
    a.emplace_back("pred_bytes_recv_per_rank_per_layer",
                   on ? p.bytes_received : model::ring_bytes_per_layer(shape()) * cfg_.batch);
    a.emplace_back("ring_bytes_sent_per_rank_per_layer",
                   model::ring_bytes_per_layer(shape()) * cfg_.batch);
    a.emplace_back("groupcast_sources_max",
                   all_reduce_max(std::vector<std::int64_t>{n.sources})[0]);
    a.emplace_back("groupcast_targets_max",
                   all_reduce_max(std::vector<std::int64_t>{n.targets})[0]);
    a.emplace_back("groupcast_batches_max",
                   all_reduce_max(std::vector<std::int64_t>{n.batches})[0]);
    const auto ranks = static_cast<std::size_t>(ctx_.mpi.size());
    rec.int_tables.push_back(
        {"cp_bytes_recv", 1, ranks, gather_int(fwd_recv_, ctx_.mpi.size(), ctx_.mpi.rank())});
    rec.int_tables.push_back({"groupcast_rows_received", 1, ranks,
                              gather_int(n.rows_received, ctx_.mpi.size(), ctx_.mpi.rank())});
    rec.int_tables.push_back({"groupcast_rows_sent", 1, ranks,
                              gather_int(n.rows_sent, ctx_.mpi.size(), ctx_.mpi.rank())});
    rec.int_tables.push_back(
        {"groupcast_allocated_bytes", 2, ranks,
         gather_int_columns({n.allocated_forward, n.allocated_backward}, ctx_.mpi.size(),
                            ctx_.mpi.rank())});
  }

  // One mode of one pass, timed over the same iteration count as the harness's loop (max over
  // ranks per iteration). A backward run first runs its forward in the same mode, untimed.
  ModeRuns run_mode(Mode mode, int iterations, bool backward) {
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

  // How the transfer overlaps the compute, and where the CPU backend does not poll, why.
  std::string overlap_mechanism() const {
    std::string out = cp_.overlap_mechanism();
    if (sim::modeled())
      out += " (modeled compute: no polling, SMPI moves transfers in simulated time)";
    else if (ctx_.backend == Backend::cpu && !cfg_.poll_progress)
      out += sim::kSmpiBuild ? " (no polling: SMPI moves transfers in simulated time)"
                             : " (polling off: --cpu-progress none)";
    return out;
  }

  BenchContext& ctx_;
  Comm& cp_;  // the context-parallel group: ctx.comm (BenchDefinition::group_size)
  RingConfig cfg_;
  kernels::AttnKernelChoice choice_;
  std::unique_ptr<kernels::AttentionEngine> engine_;
  std::unique_ptr<RingAttention> ring_;
  std::int64_t fwd_bytes_ = 0, bwd_bytes_ = 0, fwd_recv_ = 0;
  GradientComparison grads_;
  GroupCastPrediction prediction_;
  bool predicted_ = false;
};

}  // namespace

std::unique_ptr<BenchCase> make_ring_case(BenchContext& ctx, const RingConfig& cfg,
                                          kernels::AttnKernelChoice choice) {
  return std::make_unique<RingCase>(ctx, cfg, choice);
}

}  // namespace suite::ring

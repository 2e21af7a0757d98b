// RingCase's report against the formulas: each pass's rates, the forward's and the backward's
// own figures, the ideal and the group-cast's counts beside what the layout predicts.
#include <algorithm>
#include <cmath>

#include "bench/ring_attention/doc_report.hpp"
#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_case_impl.hpp"
#include "bench/ring_attention/ring_ideal.hpp"
#include "common/device/device_peak.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::ring {

void RingCase::report(const Measurement& m, CaseRecord& rec) {
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

double RingCase::phase(const Measurement& m, const std::string& name) {
  for (const auto& [n, v] : m.phase_median_s)
    if (n == name) return v;
  return NAN;
}

PassCount RingCase::forward_count() const {
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

PassCount RingCase::backward_count() const {
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

void RingCase::report_forward(const PassRates& f, const std::vector<RoundTimes>& timed,
                              CaseRecord& rec) {
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
  a.emplace_back(
      "memory_method_bytes",
      static_cast<double>(ring_->group_cast_active()
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

void RingCase::report_backward(const PassRates& f, const PassRates& b, CaseRecord& rec) {
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
  a.emplace_back("pred_bwd_bytes_per_round", model::ring_bwd_bytes_per_round(shape(), eg) * batch);
  a.emplace_back("bwd_kv_hops", std::int64_t{ring ? cfg_.n_c - 1 : 0});
  a.emplace_back("bwd_dkv_hops", std::int64_t{ring && cfg_.n_c > 1 ? cfg_.n_c : 0});
  a.emplace_back("bwd_bytes_sent_per_rank_per_layer",
                 static_cast<double>(all_reduce_max(std::vector<std::int64_t>{bwd_bytes_})[0]));
  a.emplace_back("pred_bwd_bytes_sent_per_rank_per_layer",
                 gc     ? group_cast_prediction().bwd_bytes_sent
                 : ring ? model::ring_bwd_bytes_per_layer(shape(), eg) * batch
                        : model::ring_allgather_bwd_bytes_per_layer(
                              static_cast<double>(cfg_.s()), shape().h, cfg_.n_c, g, eg, batch));
  const double pred_mem = gc ? group_cast_prediction().bwd_memory
                          : ring
                              ? model::ring_bwd_memory_bytes(shape(), eg) * batch
                              : (3 * e + eg) * cfg_.c * cfg_.q_row() + cfg_.n_c * kv_block_bytes() +
                                    (cfg_.n_c + 1.0) * dkv_block_bytes();
  a.emplace_back("bwd_memory_method_bytes",
                 static_cast<double>(gc ? all_reduce_max(std::vector<std::int64_t>{
                                              ring_->backward_method_bytes()})[0]
                                        : ring_->backward_method_bytes()));
  a.emplace_back("pred_bwd_memory_bytes", pred_mem);
  a.emplace_back("bwd_memory_scratch_bytes", static_cast<double>(ring_->backward_scratch_bytes()));
  a.emplace_back("grad_check_tolerance", gradient_tolerance(cfg_.dtype, cfg_.grad_dtype));
  if (!grads_.skipped) {
    a.emplace_back("check_err_dq", grads_.max_err_dq);
    a.emplace_back("check_err_dk", grads_.max_err_dk);
    a.emplace_back("check_err_dv", grads_.max_err_dv);
  }
  rec.int_tables.push_back({"bwd_cp_bytes_sent", 1, static_cast<std::size_t>(ctx_.mpi.size()),
                            gather_int(bwd_bytes_, ctx_.mpi.size(), ctx_.mpi.rank())});
}

const RingCase::GroupCastPrediction& RingCase::group_cast_prediction() {
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

void RingCase::report_group_cast(CaseRecord& rec) {
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
  a.emplace_back("groupcast_sources_max", all_reduce_max(std::vector<std::int64_t>{n.sources})[0]);
  a.emplace_back("groupcast_targets_max", all_reduce_max(std::vector<std::int64_t>{n.targets})[0]);
  a.emplace_back("groupcast_batches_max", all_reduce_max(std::vector<std::int64_t>{n.batches})[0]);
  const auto ranks = static_cast<std::size_t>(ctx_.mpi.size());
  rec.int_tables.push_back(
      {"cp_bytes_recv", 1, ranks, gather_int(fwd_recv_, ctx_.mpi.size(), ctx_.mpi.rank())});
  rec.int_tables.push_back({"groupcast_rows_received", 1, ranks,
                            gather_int(n.rows_received, ctx_.mpi.size(), ctx_.mpi.rank())});
  rec.int_tables.push_back(
      {"groupcast_rows_sent", 1, ranks, gather_int(n.rows_sent, ctx_.mpi.size(), ctx_.mpi.rank())});
  rec.int_tables.push_back({"groupcast_allocated_bytes", 2, ranks,
                            gather_int_columns({n.allocated_forward, n.allocated_backward},
                                               ctx_.mpi.size(), ctx_.mpi.rank())});
}

std::string RingCase::overlap_mechanism() const {
  std::string out = cp_.overlap_mechanism();
  if (sim::modeled())
    out += " (modeled compute: no polling, SMPI moves transfers in simulated time)";
  else if (ctx_.backend == Backend::cpu && !cfg_.poll_progress)
    out += sim::kSmpiBuild ? " (no polling: SMPI moves transfers in simulated time)"
                           : " (polling off: --cpu-progress none)";
  return out;
}

}  // namespace suite::ring

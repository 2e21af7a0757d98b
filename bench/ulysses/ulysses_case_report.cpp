// UlyssesCase's report against the formulas: the all-to-alls' and the ring part's bytes beside
// METHODS.md's, their bandwidths, the backward's, and with packed documents the ideal.
#include <algorithm>
#include <cmath>
#include <string>

#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_efficiency.hpp"
#include "bench/ring_attention/ring_ideal.hpp"
#include "bench/ulysses/ulysses_case_impl.hpp"
#include "common/formulas/model.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::ulysses {
namespace {

// Median of a phase (max over ranks per step), NaN when the step has no such phase.
double phase_median(const Measurement& m, const std::string& name) {
  for (const auto& [n, v] : m.phase_median_s)
    if (n == name) return v;
  return NAN;
}

}  // namespace

void UlyssesCase::report(const Measurement& m, CaseRecord& rec) {
  const double e = static_cast<double>(dtype_size(cfg_.dtype));
  const double t = static_cast<double>(cfg_.tokens_per_rank()), b = static_cast<double>(cfg_.batch);
  const double u = cfg_.u, d = cfg_.head_dim;
  const double h = static_cast<double>(cfg_.heads) * d,
               g = static_cast<double>(cfg_.heads) / cfg_.kv_heads;
  // Each all-to-all keeps one of u blocks: Q and O carry a/u heads per block, K and V the
  // K/V heads a rank attends with (n_kv/u, or one replicated head).
  const double q_block = t * b * cfg_.heads_per_rank() * d * e;
  const double kv_block = t * b * cfg_.kv_heads_per_rank() * d * e;
  const double pred_uly = (u - 1) * (2 * q_block + 2 * kv_block);
  double pred_ring = (cfg_.ring_degree() - 1) * 2.0 * static_cast<double>(cfg_.group_tokens()) * b *
                     cfg_.kv_heads_per_rank() * d * e;
  auto& a = rec.attrs;
  const ring::RingAttention& part = method_->ring_part();
  if (cfg_.ring_variant == ring::Variant::groupcast) {
    a.emplace_back("groupcast_schedule", part.group_cast_active()
                                             ? std::string("groupcast")
                                             : "ring: " + part.group_cast_fallback());
    if (part.group_cast_active()) pred_ring = group_cast_bytes(false, e, 0);
  }
  a.emplace_back("ulysses_bytes_sent_per_rank",
                 static_cast<double>(all_reduce_max(std::vector<std::int64_t>{ulysses_bytes_})[0]));
  a.emplace_back("pred_ulysses_bytes_sent_per_rank", pred_uly);
  // METHODS.md's form (no replication): 4 (u-1)/u * 2 (u t) h / u for MHA, K and V / g.
  a.emplace_back("pred_ulysses_bytes_no_replication",
                 model::ulysses_bytes_per_layer(u * t, h, cfg_.u, g, e) * b);
  a.emplace_back("ring_bytes_sent_per_rank",
                 static_cast<double>(all_reduce_max(std::vector<std::int64_t>{ring_bytes_})[0]));
  a.emplace_back("pred_ring_bytes_sent_per_rank", pred_ring);
  a.emplace_back("bytes_sent_per_rank",
                 static_cast<double>(
                     all_reduce_max(std::vector<std::int64_t>{ulysses_bytes_ + ring_bytes_})[0]));
  a.emplace_back("pred_bytes_sent_per_rank", pred_uly + pred_ring);
  // nccl-tests conventions: algbw = bytes per rank incl. its own block / time; busbw x (u-1)/u.
  const double f = model::busbw_factor_rs_ag_a2a(cfg_.u);
  for (const auto& [name, block] : {std::pair<const char*, double>{"q", q_block},
                                    {"k", kv_block},
                                    {"v", kv_block},
                                    {"out", q_block}}) {
    const double algbw = u * block / phase_median(m, std::string("a2a_") + name) / 1e9;
    a.emplace_back(std::string("a2a_") + name + "_algbw_GBps", algbw);
    a.emplace_back(std::string("a2a_") + name + "_busbw_GBps", algbw * f);
  }
  a.emplace_back("attn_kernel", engine_->name());
  a.emplace_back("attn_library", engine_->library_version());
  a.emplace_back("check_tolerance", ring::reference_tolerance(cfg_.dtype));
  if (cfg_.backward()) report_backward(m, rec, q_block / e, kv_block / e);
  // Packed documents: the ring part's balance (plain Ulysses: every rank attends over the
  // whole pack for its heads, equal work by construction).
  const ring::WorkTotals totals =
      ring::report_documents(cfg_.ring_config(), method_->ring_part(), method_->positions(), rec);
  if (cfg_.docs) report_against_ideal(m, totals, rec);
  const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
  rec.int_tables.push_back({"ulysses_bytes_sent", 1, static_cast<std::size_t>(ranks),
                            gather_int(ulysses_bytes_, ranks, rank)});
  rec.int_tables.push_back({"ring_bytes_sent", 1, static_cast<std::size_t>(ranks),
                            gather_int(ring_bytes_, ranks, rank)});
}

void UlyssesCase::report_against_ideal(const Measurement& m, const ring::WorkTotals& totals,
                                       CaseRecord& rec) {
  const ring::RingConfig rc = cfg_.ring_config();
  const std::vector<std::int64_t> work = method_->ring_part().work_pairs();
  const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
  rec.int_tables.push_back({"round_work_pairs", work.size(), static_cast<std::size_t>(ranks),
                            gather_int_columns(work, ranks, rank)});
  const double mean = static_cast<double>(totals.sum) / ranks;
  const double most = static_cast<double>(totals.most);
  double t_attention = phase_median(m, "attention");
  if (cfg_.backward()) t_attention += phase_median(m, "bwd_attention");
  const double flops_per_pair = (cfg_.backward() ? 14.0 : 4.0) * rc.head_dim * rc.heads;
  const double flops_per_s = flops_per_pair * most / t_attention;
  const ring::IdealTimes ideal = ring::measure_ideal(rc, ctx_.device, *engine_, flops_per_s,
                                                     cfg_.backward(), ring::kIdealIterations);
  auto& a = rec.attrs;
  if (ideal.skipped) {
    a.emplace_back("ideal_note", "skipped: " + ideal.why_skipped);
    return;
  }
  const double ideal_s = ideal.fwd_s + ideal.bwd_s, t = m.step.median;
  a.emplace_back("ideal_time_fwd_s", ideal.fwd_s);
  if (cfg_.backward()) a.emplace_back("ideal_time_bwd_s", ideal.bwd_s);
  a.emplace_back(cfg_.backward() ? "efficiency_vs_ideal_fwd_bwd" : "efficiency_vs_ideal_fwd",
                 ideal_s / rc.n_c / t);
  const ring::EfficiencyFactors f =
      ring::efficiency_factors(mean, most, rc.n_c, ideal_s, t_attention, t);
  const std::string prefix = cfg_.backward() ? "step_" : "";
  a.emplace_back(prefix + "eff_balance", f.balance);
  a.emplace_back(prefix + "eff_pair_rate", f.pair_rate);
  a.emplace_back(prefix + "eff_exchange", f.exchange);
}

double UlyssesCase::group_cast_bytes(bool backward, double e, double e_g) const {
  if (ctx_.mpi.rank() != 0) return NAN;
  const ring::GroupCastTraffic t = ring::group_cast_traffic(cfg_.ring_config());
  const double row = 2.0 * static_cast<double>(cfg_.ring_config().kv_row());
  double most = 0;
  for (int r = 0; r < t.n_c; ++r)
    most = std::max(most, static_cast<double>(t.sent(r)) * row * e +
                              (backward ? static_cast<double>(t.received(r)) * row * e_g : 0.0));
  return most;
}

void UlyssesCase::report_backward(const Measurement& m, CaseRecord& rec, double q_elems,
                                  double kv_elems) {
  const double u = cfg_.u, e = static_cast<double>(dtype_size(cfg_.dtype));
  const double e_kv = static_cast<double>(dtype_size(method_->dkv_a2a_type()));
  const double pred_uly = (u - 1) * (2 * q_elems * e + 2 * kv_elems * e_kv);
  const ring::RingConfig rc = cfg_.ring_config();
  const model::Ring shape{static_cast<double>(rc.heads) * rc.head_dim,
                          static_cast<double>(rc.c),
                          rc.n_c,
                          static_cast<double>(rc.group()),
                          e,
                          rc.causal};
  const double e_g = static_cast<double>(dtype_size(cfg_.grad_dtype));
  double pred_ring = model::ring_bwd_bytes_per_layer(shape, e_g) * static_cast<double>(cfg_.batch);
  if (method_->ring_part().group_cast_active()) pred_ring = group_cast_bytes(true, e, e_g);
  auto max_bytes = [](std::int64_t v) {
    return static_cast<double>(all_reduce_max(std::vector<std::int64_t>{v})[0]);
  };
  auto& a = rec.attrs;
  a.emplace_back("grad_dtype", std::string(dtype_name(cfg_.grad_dtype)));
  a.emplace_back("bwd_dkv_a2a_dtype", std::string(dtype_name(method_->dkv_a2a_type())));
  a.emplace_back("bwd_ulysses_bytes_sent_per_rank", max_bytes(bwd_ulysses_bytes_));
  a.emplace_back("pred_bwd_ulysses_bytes_sent_per_rank", pred_uly);
  a.emplace_back("bwd_ring_bytes_sent_per_rank", max_bytes(bwd_ring_bytes_));
  a.emplace_back("pred_bwd_ring_bytes_sent_per_rank", pred_ring);
  a.emplace_back("bwd_bytes_sent_per_rank", max_bytes(bwd_ulysses_bytes_ + bwd_ring_bytes_));
  a.emplace_back("pred_bwd_bytes_sent_per_rank", pred_uly + pred_ring);
  a.emplace_back("grad_check_tolerance", ring::gradient_tolerance(cfg_.dtype, cfg_.grad_dtype));
  if (!grads_.skipped) {
    a.emplace_back("check_err_dq", grads_.max_err_dq);
    a.emplace_back("check_err_dk", grads_.max_err_dk);
    a.emplace_back("check_err_dv", grads_.max_err_dv);
  }
  const double f = model::busbw_factor_rs_ag_a2a(cfg_.u);
  for (const auto& [name, bytes] : {std::pair<const char*, double>{"do", q_elems * e},
                                    {"dq", q_elems * e},
                                    {"dk", kv_elems * e_kv},
                                    {"dv", kv_elems * e_kv}}) {
    const double t = phase_median(m, std::string("bwd_a2a_") + name);
    const double algbw = u * bytes / t / 1e9;
    a.emplace_back(std::string("bwd_a2a_") + name + "_algbw_GBps", algbw);
    a.emplace_back(std::string("bwd_a2a_") + name + "_busbw_GBps", algbw * f);
  }
  const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
  rec.int_tables.push_back({"bwd_ulysses_bytes_sent", 1, static_cast<std::size_t>(ranks),
                            gather_int(bwd_ulysses_bytes_, ranks, rank)});
  rec.int_tables.push_back({"bwd_ring_bytes_sent", 1, static_cast<std::size_t>(ranks),
                            gather_int(bwd_ring_bytes_, ranks, rank)});
}

}  // namespace suite::ulysses

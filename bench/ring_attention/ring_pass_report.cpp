#include "bench/ring_attention/ring_pass_report.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "bench/ring_attention/ring_efficiency.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/stats.hpp"
#include "common/transport/mpi_env.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::ring {

double ModeRuns::median() const {
  return percentile(step, 0.5);
}

std::vector<double> round_medians(const std::vector<RoundTimes>& runs,
                                  std::vector<double> RoundTimes::*series, int rounds) {
  std::vector<double> out(static_cast<std::size_t>(rounds), 0.0);
  for (int k = 0; k < rounds; ++k) {
    std::vector<double> v;
    for (const auto& r : runs)
      if (static_cast<int>((r.*series).size()) > k) v.push_back((r.*series)[k]);
    out[static_cast<std::size_t>(k)] = v.empty() ? 0.0 : percentile(v, 0.5);
  }
  return out;
}

WorkTotals work_totals(const std::vector<std::int64_t>& work) {
  WorkTotals t;
  t.busiest = all_reduce_max(work);
  std::int64_t mine = 0;
  for (auto w : work)
    mine += w;
  SUITE_MPI_CHECK(MPI_Allreduce(&mine, &t.sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  SUITE_MPI_CHECK(MPI_Allreduce(&mine, &t.most, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
  return t;
}

PassRates report_pass(const PassCount& count, const PassRuns& runs, int n_c, CaseRecord& rec) {
  int ranks = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int R = static_cast<int>(count.work.size());
  const WorkTotals totals = work_totals(count.work);
  const std::vector<std::int64_t>& busiest = totals.busiest;  // sets each round's time
  const std::int64_t max_pairs = totals.most;
  const double bytes =
      static_cast<double>(all_reduce_max(std::vector<std::int64_t>{runs.bytes_sent})[0]);

  PassRates r;
  r.t_comp = runs.compute.median();
  r.t_xfer = runs.transfer.median();
  r.mean_pairs = static_cast<double>(totals.sum) / ranks;
  r.max_pairs = static_cast<double>(max_pairs);
  r.F = count.flops_per_pair * static_cast<double>(max_pairs) / r.t_comp;
  r.W = n_c > 1 ? bytes / r.t_xfer : NAN;
  // The overlapped time this run's F and W predict: each round as long as the busiest rank's
  // compute or the exchange, whichever is longer (or both, where nothing overlaps).
  double pred = 0;
  for (int k = 0; k < R; ++k) {
    const double tc = count.flops_per_pair * static_cast<double>(busiest[k]) / r.F;
    const double tx = n_c > 1 ? count.round_bytes[k] / r.W : 0.0;
    pred += count.overlapped_rounds ? std::max(tc, tx) : tc + tx;
  }
  if (n_c == 1) pred = r.t_comp;

  auto& a = rec.attrs;
  auto name = [&](const char* n) { return count.prefix + n; };
  a.emplace_back(name("time_overlapped_median_s"), runs.t_over);
  a.emplace_back(name("time_compute_only_median_s"), r.t_comp);
  a.emplace_back(name("time_transfer_only_median_s"), r.t_xfer);
  a.emplace_back(name("exposed_comm_s"), runs.t_over - r.t_comp);
  a.emplace_back(name("overlapped_over_compute_only"), runs.t_over / r.t_comp);
  a.emplace_back(name("overlap_efficiency"),
                 n_c > 1 ? std::clamp(1.0 - (runs.t_over - r.t_comp) / r.t_xfer, 0.0, 1.0) : NAN);
  a.emplace_back(name("pred_time_overlapped_s"), pred);
  a.emplace_back(name("measured_F_flops"), r.F);
  a.emplace_back(name("measured_W_Bps"), r.W);
  a.emplace_back(name("flops_busiest_rank"), count.flops_per_pair * static_cast<double>(max_pairs));

  auto table = [&](const char* n, const std::vector<double>& v, std::size_t rows) {
    rec.tables.push_back(
        {name(n), rows, static_cast<std::size_t>(ranks), gather_columns(v, ranks, rank)});
  };
  const auto rows = static_cast<std::size_t>(R);
  table("round_compute_s", round_medians(runs.timed, &RoundTimes::compute_s, R), rows);
  table("round_wait_s", round_medians(runs.timed, &RoundTimes::wait_s, R), rows);
  table("round_transfer_s", round_medians(runs.timed, &RoundTimes::transfer_s, R), rows);
  table("compute_only_round_s", round_medians(runs.compute.rounds, &RoundTimes::compute_s, R),
        rows);
  table("compute_only_time_s", runs.compute.local, runs.compute.local.size());
  table("transfer_only_time_s", runs.transfer.local, runs.transfer.local.size());
  rec.int_tables.push_back({name("round_work_pairs"), rows, static_cast<std::size_t>(ranks),
                            gather_int_columns(count.work, ranks, rank)});
  return r;
}

void report_efficiency_factors(const std::string& prefix, const PassRates& rates, int n_c,
                               double ideal_s, double t_over, CaseRecord& rec) {
  const EfficiencyFactors e =
      efficiency_factors(rates.mean_pairs, rates.max_pairs, n_c, ideal_s, rates.t_comp, t_over);
  rec.attrs.emplace_back(prefix + "eff_balance", e.balance);
  rec.attrs.emplace_back(prefix + "eff_pair_rate", e.pair_rate);
  rec.attrs.emplace_back(prefix + "eff_exchange", e.exchange);
}

}  // namespace suite::ring

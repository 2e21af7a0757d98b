#include "bench/moe/moe_report.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "common/errors.hpp"
#include "common/model.hpp"
#include "common/record_access.hpp"

namespace suite::moe {
namespace {

// Every rank's vector (same length) on rank 0, rank-major.
std::vector<double> gather_to_root(const std::vector<double>& mine, int ranks, int rank) {
  std::vector<double> all(rank == 0 ? mine.size() * static_cast<std::size_t>(ranks) : 0);
  SUITE_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                             static_cast<int>(mine.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return all;
}

double max_over_mean(const double* v, std::size_t n) {
  const double sum = std::accumulate(v, v + n, 0.0);
  return sum > 0 ? *std::max_element(v, v + n) * static_cast<double>(n) / sum : 0;
}

double phase(const Measurement& m, const char* name) {
  for (const auto& [n, v] : m.phase_median_s)
    if (n == name) return v;
  return 0;
}

template <class T>
T column(const std::vector<double>& all, std::size_t width, int rank, std::size_t col) {
  return static_cast<T>(all[static_cast<std::size_t>(rank) * width + col]);
}

}  // namespace

void report_case(const MoeConfig& c, const Measurement& m, const RankFacts& f,
                 const std::vector<double>& balance_history, CaseRecord& rec) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::size_t E = static_cast<std::size_t>(c.experts);
  // One row per rank: group loads (3E), then the rank's own figures.
  std::vector<double> mine;
  for (const auto* v : {&f.group_kept, &f.group_routed, &f.group_prob_sum})
    mine.insert(mine.end(), v->begin(), v->end());
  const std::size_t own = mine.size();
  for (double x :
       {static_cast<double>(f.measured.control), static_cast<double>(f.measured.dispatch),
        static_cast<double>(f.measured.combine), static_cast<double>(f.implied.control),
        static_cast<double>(f.implied.dispatch), static_cast<double>(f.implied.combine),
        f.expert_flops, f.recv_rows, f.dropped, f.rates.flops_per_s, f.rates.bytes_per_s})
    mine.push_back(x);
  const std::size_t width = mine.size();
  const std::vector<double> all = gather_to_root(mine, ranks, rank);
  if (rank != 0) return;

  const int groups = ranks / c.n_e;
  const double e = static_cast<double>(dtype_size(c.dtype));
  auto& a = rec.attrs;
  // Loads: per group (leaders hold the group's vectors).
  IntTable kept{"expert_load", static_cast<std::size_t>(groups), E, {}},
      routed{"expert_load_routed", static_cast<std::size_t>(groups), E, {}};
  double kept_mm = 0, routed_mm = 0, rank_mm = 0, aux = 0;
  for (int g = 0; g < groups; ++g) {
    const double* row = all.data() + static_cast<std::size_t>(g * c.n_e) * width;
    for (std::size_t i = 0; i < E; ++i) {
      kept.values.push_back(static_cast<std::int64_t>(row[i]));
      routed.values.push_back(static_cast<std::int64_t>(row[E + i]));
    }
    kept_mm = std::max(kept_mm, max_over_mean(row, E));
    routed_mm = std::max(routed_mm, max_over_mean(row + E, E));
    std::vector<double> frac(E), prob(E);
    const double copies = static_cast<double>(c.k) * c.tokens * c.n_e;
    for (std::size_t i = 0; i < E; ++i) {
      frac[i] = row[E + i] / copies;
      prob[i] = row[2 * E + i] / (static_cast<double>(c.tokens) * c.n_e);
    }
    aux += model::moe_aux_loss(frac.data(), prob.data(), c.experts, kAuxLossAlpha) / groups;
    std::vector<double> rank_rows;
    for (int r = g * c.n_e; r < (g + 1) * c.n_e; ++r)
      rank_rows.push_back(column<double>(all, width, r, own + 7));
    rank_mm = std::max(rank_mm, max_over_mean(rank_rows.data(), rank_rows.size()));
  }
  rec.int_tables.push_back(std::move(kept));
  rec.int_tables.push_back(std::move(routed));
  a.emplace_back("expert_load_max_over_mean", kept_mm);
  a.emplace_back("expert_load_routed_max_over_mean", routed_mm);
  a.emplace_back("rank_load_max_over_mean", rank_mm);
  a.emplace_back("aux_loss", aux);
  a.emplace_back("pred_aux_loss", kAuxLossAlpha);  // its value at uniform routing

  // Per-rank figures.
  IntTable rank_load{"rank_load", 1, static_cast<std::size_t>(ranks), {}};
  IntTable sent{"moe_bytes_sent", 1, static_cast<std::size_t>(ranks), {}},
      implied{"moe_bytes_implied", 1, static_cast<std::size_t>(ranks), {}},
      control{"control_bytes", 1, static_cast<std::size_t>(ranks), {}},
      dispatch{"dispatch_bytes", 1, static_cast<std::size_t>(ranks), {}},
      combine{"combine_bytes", 1, static_cast<std::size_t>(ranks), {}};
  // nccl-tests all-to-all conventions: algbw = the rank's whole buffer, its own block included
  // (dispatch: its kept copies; combine: the rows its experts processed, h e bytes each) / the
  // median phase time; busbw = algbw (N_e-1)/N_e, the link rate under uniform routing.
  const std::size_t R = static_cast<std::size_t>(ranks);
  Table d_bw{"dispatch_algbw_GBps", 1, R, {}}, c_bw{"combine_algbw_GBps", 1, R, {}},
      d_bus{"dispatch_busbw_GBps", 1, R, {}}, c_bus{"combine_busbw_GBps", 1, R, {}};
  const double t_dispatch = phase(m, "dispatch"), t_combine = phase(m, "combine"),
               t_expert = phase(m, "expert");
  const double row_bytes = static_cast<double>(c.h) * e,
               bus_factor = model::busbw_factor_rs_ag_a2a(c.n_e);
  auto gbps = [](double bytes, double t) { return t > 0 ? bytes / t / 1e9 : 0.0; };
  double d_algbw = 0, c_algbw = 0;  // means over ranks
  bool match = true;
  double a2a_sum = 0, a2a_max = 0, flops_max = 0, flops_sum = 0, dropped = 0, f_sum = 0, w_sum = 0;
  for (int r = 0; r < ranks; ++r) {
    auto col = [&](std::size_t i) { return column<std::int64_t>(all, width, r, own + i); };
    const std::int64_t measured = col(0) + col(1) + col(2), expected = col(3) + col(4) + col(5);
    match = match && col(0) == col(3) && col(1) == col(4) && col(2) == col(5);
    sent.values.push_back(measured);
    implied.values.push_back(expected);
    control.values.push_back(col(0));
    dispatch.values.push_back(col(1));
    combine.values.push_back(col(2));
    const double own_copies = static_cast<double>(c.k) * static_cast<double>(c.tokens) -
                              column<double>(all, width, r, own + 8);
    const double d = gbps(own_copies * row_bytes, t_dispatch),
                 cb = gbps(column<double>(all, width, r, own + 7) * row_bytes, t_combine);
    d_bw.values.push_back(d);
    c_bw.values.push_back(cb);
    d_bus.values.push_back(d * bus_factor);
    c_bus.values.push_back(cb * bus_factor);
    d_algbw += d / ranks;
    c_algbw += cb / ranks;
    const double a2a = static_cast<double>(col(1) + col(2));
    a2a_sum += a2a;
    a2a_max = std::max(a2a_max, a2a);
    const double flops = column<double>(all, width, r, own + 6);
    flops_sum += flops;
    flops_max = std::max(flops_max, flops);
    rank_load.values.push_back(col(7));
    dropped += column<double>(all, width, r, own + 8);
    f_sum += column<double>(all, width, r, own + 9);
    w_sum += column<double>(all, width, r, own + 10);
  }
  const double pred_a2a = model::moe_a2a_bytes_per_rank(c.k, c.tokens, c.h, c.n_e, e);
  a.emplace_back("bytes_match", std::int64_t{match ? 1 : 0});
  a.emplace_back("a2a_bytes_per_rank", a2a_sum / ranks);  // mean over ranks
  a.emplace_back("a2a_bytes_per_rank_max", a2a_max);
  a.emplace_back("pred_a2a_bytes_per_rank", pred_a2a);
  a.emplace_back("a2a_bytes_rel_to_pred", pred_a2a > 0 ? a2a_sum / ranks / pred_a2a : 0.0);
  a.emplace_back("dispatch_algbw_GBps", d_algbw);
  a.emplace_back("dispatch_busbw_GBps", d_algbw * bus_factor);
  a.emplace_back("combine_algbw_GBps", c_algbw);
  a.emplace_back("combine_busbw_GBps", c_algbw * bus_factor);
  const double total_copies = static_cast<double>(c.k) * c.tokens * ranks;
  a.emplace_back("capacity", kernels::moe::expert_capacity(c.capacity_factor, c.k, c.tokens * c.n_e,
                                                           c.experts));
  a.emplace_back("dropped_copies", static_cast<std::int64_t>(dropped));
  a.emplace_back("drop_rate", dropped / total_copies);
  a.emplace_back("expert_flops_per_rank_max", flops_max);
  a.emplace_back("expert_flops_per_rank", flops_sum / ranks);  // mean over ranks
  a.emplace_back(
      "pred_expert_flops_per_rank",
      c.k * c.tokens * model::moe_expert_flops_per_pair(c.h, c.d_ff, c.mlp == Mlp::swiglu));
  // Time ratio: measured against (F/W)((N_e-1)/N_e)/d_ff (/1.5 SwiGLU), F and W from this run.
  // METHODS.md's formula is for e = 2 bytes; for e bytes the all-to-all side scales by e/2.
  const double F = f_sum / ranks, W = w_sum / ranks;
  a.emplace_back("calib_flops_per_s", F);
  a.emplace_back("calib_bytes_per_s", W);
  a.emplace_back("expert_flops_per_s", t_expert > 0 ? flops_max / t_expert : 0.0);
  a.emplace_back("a2a_bytes_per_s",
                 t_dispatch + t_combine > 0 ? a2a_max / (t_dispatch + t_combine) : 0.0);
  a.emplace_back("a2a_expert_ratio", t_expert > 0 ? (t_dispatch + t_combine) / t_expert : 0.0);
  a.emplace_back("pred_a2a_expert_ratio",
                 W > 0 ? model::moe_a2a_to_expert_ratio(F, W, c.n_e, static_cast<double>(c.d_ff),
                                                        c.mlp == Mlp::swiglu) *
                             e / 2
                       : 0.0);
  rec.int_tables.push_back(std::move(rank_load));
  rec.int_tables.push_back(std::move(sent));
  rec.int_tables.push_back(std::move(implied));
  rec.int_tables.push_back(std::move(control));
  rec.int_tables.push_back(std::move(dispatch));
  rec.int_tables.push_back(std::move(combine));
  rec.tables.push_back(std::move(d_bw));
  rec.tables.push_back(std::move(c_bw));
  rec.tables.push_back(std::move(d_bus));
  rec.tables.push_back(std::move(c_bus));
  if (!balance_history.empty()) {
    std::vector<double> history = balance_history;
    history.push_back(routed_mm);  // the routing of the timed steps
    rec.tables.push_back({"balance_max_over_mean", 1, history.size(), history});
  }
}

void print_moe_table(const std::vector<CaseRecord>& records) {
  if (records.empty()) return;
  // One row per case: its sweep coordinates (T, E, k, mlp, skew and its knob, CF) first, so
  // the rows of a sweep tell apart; the case names are in the results file.
  std::printf(
      "\nMoE layer forward (median step = max over ranks; times in us; bytes = dispatch + "
      "combine per rank; a/M = zipf alpha or hot factor; CF 0 = dropless)\n");
  std::printf(
      "%7s %5s %2s %-6s %-4s %5s %5s %9s %8s %8s %8s %8s %8s %6s %6s %6s %8s %11s %11s %6s %6s "
      "%5s\n",
      "T", "E", "k", "mlp", "skew", "a/M", "CF", "step", "route", "permute", "dispatch", "expert",
      "combine", "max/mn", "drop%", "rank", "aux", "bytes", "pred_unif", "ratio", "pred", "check");
  for (const auto& r : records) {
    const std::string skew = param_text(r, "skew");
    const double knob = skew == "zipf"  ? attr_number(r, "alpha")
                        : skew == "hot" ? attr_number(r, "hot_factor")
                                        : 0;
    const double passed = attr_number(r, "check_passed");
    std::printf(
        "%7.0f %5.0f %2.0f %-6s %-4s %5.2f %5.2f %9.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6.2f %6.2f "
        "%6.2f %8.5f %11.0f %11.0f %6.3f %6.3f %5s\n",
        attr_number(r, "tokens"), attr_number(r, "experts"), attr_number(r, "top_k"),
        param_text(r, "mlp").c_str(), skew.c_str(), knob, attr_number(r, "capacity_factor"),
        attr_number(r, "time_median_s") * 1e6, attr_number(r, "phase_route_median_s") * 1e6,
        attr_number(r, "phase_permute_median_s") * 1e6,
        attr_number(r, "phase_dispatch_median_s") * 1e6,
        attr_number(r, "phase_expert_median_s") * 1e6,
        attr_number(r, "phase_combine_median_s") * 1e6, attr_number(r, "expert_load_max_over_mean"),
        100 * attr_number(r, "drop_rate"), attr_number(r, "rank_load_max_over_mean"),
        attr_number(r, "aux_loss"), attr_number(r, "a2a_bytes_per_rank"),
        attr_number(r, "pred_a2a_bytes_per_rank"), attr_number(r, "a2a_expert_ratio"),
        attr_number(r, "pred_a2a_expert_ratio"),
        passed == 1  ? (attr_number(r, "bytes_match") == 1 ? "ok" : "BYTES")
        : passed < 0 ? "off"
                     : "FAIL");
  }
}

}  // namespace suite::moe

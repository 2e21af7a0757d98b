#include "bench/moe/moe_report.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "common/formulas/model.hpp"
#include "common/harness/errors.hpp"
#include "common/results/record_access.hpp"

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

// Columns of a rank's row after its group loads (moe_report's gather).
enum Col : std::size_t {
  kControl,
  kDispatch,
  kCombine,
  kImpControl,
  kImpDispatch,
  kImpCombine,
  kFlops,
  kRecvRows,
  kDropped,
  kCalibF,
  kCalibW,
  kBwdControl,
  kBwdCombine,
  kBwdDispatch,
  kBwdImpControl,
  kBwdImpCombine,
  kBwdImpDispatch,
  kBwdFlops,
  kGradErr,
  kWidth = kGradErr + 4
};

std::vector<double> rank_row(const RankFacts& f) {
  std::vector<double> v = {static_cast<double>(f.measured.control),
                           static_cast<double>(f.measured.dispatch),
                           static_cast<double>(f.measured.combine),
                           static_cast<double>(f.implied.control),
                           static_cast<double>(f.implied.dispatch),
                           static_cast<double>(f.implied.combine),
                           f.expert_flops,
                           f.recv_rows,
                           f.dropped,
                           f.rates.flops_per_s,
                           f.rates.bytes_per_s,
                           static_cast<double>(f.bwd_measured.control),
                           static_cast<double>(f.bwd_measured.combine),
                           static_cast<double>(f.bwd_measured.dispatch),
                           static_cast<double>(f.bwd_implied.control),
                           static_cast<double>(f.bwd_implied.combine),
                           static_cast<double>(f.bwd_implied.dispatch),
                           f.bwd_expert_flops};
  v.insert(v.end(), f.grad_err.begin(), f.grad_err.end());
  return v;
}

void add_calls(const char* pass, const CollectiveCalls& got, const model::MoeCollectives& pred,
               Attributes& a) {
  a.emplace_back(std::string(pass) + "_collectives", std::int64_t{got.total()});
  a.emplace_back("pred_" + std::string(pass) + "_collectives", std::int64_t{pred.total()});
}

// The fwd_bwd pass's own figures (the forward's are recorded as for the fwd pass).
void backward_figures(const MoeConfig& c, const Measurement& m, const RankFacts& f,
                      const std::vector<double>& all, std::size_t width, std::size_t own,
                      CaseRecord& rec) {
  const int ranks = static_cast<int>(all.size() / width);
  const std::size_t R = static_cast<std::size_t>(ranks);
  const double e = static_cast<double>(dtype_size(c.dtype)), row_bytes = c.h * e;
  const bool swiglu = c.mlp == Mlp::swiglu;
  auto& a = rec.attrs;
  auto col = [&](int r, std::size_t i) { return column<double>(all, width, r, own + i); };
  IntTable control{"bwd_control_bytes", 1, R, {}}, combine{"bwd_combine_bytes", 1, R, {}},
      dispatch{"bwd_dispatch_bytes", 1, R, {}};
  double bwd_sum = 0, fwd_sum = 0, flops_sum = 0, flops_max = 0, d_algbw = 0, c_algbw = 0;
  const double t_combine = phase(m, "bwd_combine"), t_dispatch = phase(m, "bwd_dispatch"),
               t_expert = phase(m, "bwd_expert");
  auto gbps = [](double bytes, double t) { return t > 0 ? bytes / t / 1e9 : 0.0; };
  for (int r = 0; r < ranks; ++r) {
    control.values.push_back(static_cast<std::int64_t>(col(r, kBwdControl)));
    combine.values.push_back(static_cast<std::int64_t>(col(r, kBwdCombine)));
    dispatch.values.push_back(static_cast<std::int64_t>(col(r, kBwdDispatch)));
    bwd_sum += col(r, kBwdCombine) + col(r, kBwdDispatch);
    fwd_sum += col(r, kDispatch) + col(r, kCombine);
    flops_sum += col(r, kBwdFlops);
    flops_max = std::max(flops_max, col(r, kBwdFlops));
    // As the forward's: the rank's whole buffer, own block included. bwd_combine sends one
    // row per kept copy of its tokens, bwd_dispatch one per row its experts received.
    c_algbw +=
        gbps((c.k * static_cast<double>(c.tokens) - col(r, kDropped)) * row_bytes, t_combine) /
        ranks;
    d_algbw += gbps(col(r, kRecvRows) * row_bytes, t_dispatch) / ranks;
  }
  const double bus = model::busbw_factor_rs_ag_a2a(c.n_e);
  const double pred_fwd_bwd = model::moe_a2a_bytes_per_rank_fwd_bwd(c.k, c.tokens, c.h, c.n_e, e);
  a.emplace_back("fwd_bwd_a2a_bytes_per_rank", (fwd_sum + bwd_sum) / ranks);
  a.emplace_back("pred_fwd_bwd_a2a_bytes_per_rank", pred_fwd_bwd);
  a.emplace_back("fwd_bwd_a2a_bytes_rel_to_pred",
                 pred_fwd_bwd > 0 ? (fwd_sum + bwd_sum) / ranks / pred_fwd_bwd : 0.0);
  a.emplace_back("bwd_a2a_bytes_per_rank", bwd_sum / ranks);
  a.emplace_back("pred_bwd_a2a_bytes_per_rank",
                 model::moe_a2a_bytes_per_rank(c.k, c.tokens, c.h, c.n_e, e));
  a.emplace_back("bwd_expert_flops_per_rank", flops_sum / ranks);
  a.emplace_back("bwd_expert_flops_per_rank_max", flops_max);
  a.emplace_back("pred_bwd_expert_flops_per_rank",
                 c.k * c.tokens * model::moe_expert_bwd_flops_per_pair(c.h, c.d_ff, swiglu));
  a.emplace_back("bwd_expert_flops_per_s", t_expert > 0 ? flops_max / t_expert : 0.0);
  a.emplace_back("bwd_combine_algbw_GBps", c_algbw);
  a.emplace_back("bwd_combine_busbw_GBps", c_algbw * bus);
  a.emplace_back("bwd_dispatch_algbw_GBps", d_algbw);
  a.emplace_back("bwd_dispatch_busbw_GBps", d_algbw * bus);
  a.emplace_back("bwd_a2a_expert_ratio", t_expert > 0 ? (t_combine + t_dispatch) / t_expert : 0.0);
  const double F = attr_number(rec, "calib_flops_per_s"), W = attr_number(rec, "calib_bytes_per_s");
  a.emplace_back(
      "pred_bwd_a2a_expert_ratio",
      W > 0 ? model::moe_bwd_a2a_to_expert_ratio(F, W, c.n_e, static_cast<double>(c.d_ff), swiglu) *
                  e / 2
            : 0.0);
  const double t_fwd = phase(m, "forward"), t_bwd = phase(m, "backward");
  a.emplace_back("bwd_over_fwd_time", t_fwd > 0 ? t_bwd / t_fwd : 0.0);
  add_calls("bwd", f.bwd_calls, model::moe_collectives_bwd(c.dispatch == Dispatch::hierarchical),
            a);
  // Largest gradient error over ranks (NaN when the check did not run).
  const char* names[] = {"grad_input_max_abs_err", "grad_expert_weights_max_abs_err",
                         "grad_router_max_abs_err", "grad_gate_max_abs_err"};
  for (std::size_t i = 0; i < 4; ++i) {
    double worst = NAN;
    for (int r = 0; r < ranks; ++r) {
      const double v = col(r, kGradErr + i);
      if (!std::isnan(v)) worst = std::isnan(worst) ? v : std::max(worst, v);
    }
    a.emplace_back(names[i], worst);
  }
  rec.int_tables.push_back(std::move(control));
  rec.int_tables.push_back(std::move(combine));
  rec.int_tables.push_back(std::move(dispatch));
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
  const std::vector<double> row = rank_row(f);
  SUITE_CHECK(row.size() == kWidth, "moe_report: a rank's row has one value per column");
  mine.insert(mine.end(), row.begin(), row.end());
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
      rank_rows.push_back(column<double>(all, width, r, own + kRecvRows));
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
    // The step's bytes: the forward's, and the backward's when it ran (zeros otherwise).
    const std::int64_t measured = col(kControl) + col(kDispatch) + col(kCombine) +
                                  col(kBwdControl) + col(kBwdCombine) + col(kBwdDispatch),
                       expected = col(kImpControl) + col(kImpDispatch) + col(kImpCombine) +
                                  col(kBwdImpControl) + col(kBwdImpCombine) + col(kBwdImpDispatch);
    for (std::size_t i = kControl; i <= kCombine; ++i)
      match = match && col(i) == col(i + 3) && col(kBwdControl + i) == col(kBwdImpControl + i);
    sent.values.push_back(measured);
    implied.values.push_back(expected);
    control.values.push_back(col(kControl));
    dispatch.values.push_back(col(kDispatch));
    combine.values.push_back(col(kCombine));
    const double own_copies = static_cast<double>(c.k) * static_cast<double>(c.tokens) -
                              column<double>(all, width, r, own + kDropped);
    const double d = gbps(own_copies * row_bytes, t_dispatch),
                 cb = gbps(column<double>(all, width, r, own + kRecvRows) * row_bytes, t_combine);
    d_bw.values.push_back(d);
    c_bw.values.push_back(cb);
    d_bus.values.push_back(d * bus_factor);
    c_bus.values.push_back(cb * bus_factor);
    d_algbw += d / ranks;
    c_algbw += cb / ranks;
    const double a2a = static_cast<double>(col(kDispatch) + col(kCombine));
    a2a_sum += a2a;
    a2a_max = std::max(a2a_max, a2a);
    const double flops = column<double>(all, width, r, own + kFlops);
    flops_sum += flops;
    flops_max = std::max(flops_max, flops);
    rank_load.values.push_back(col(kRecvRows));
    dropped += column<double>(all, width, r, own + kDropped);
    f_sum += column<double>(all, width, r, own + kCalibF);
    w_sum += column<double>(all, width, r, own + kCalibW);
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
  // Collective calls rank 0 made per pass (every rank makes the same): rows fwd[, bwd],
  // columns all-to-all, all-to-all-v, all-gather.
  add_calls("fwd", f.fwd_calls,
            model::moe_collectives_fwd(!c.dropless(), c.dispatch == Dispatch::hierarchical), a);
  IntTable calls{"collective_calls", 0, 3, {}};
  for (const CollectiveCalls* p : {&f.fwd_calls, &f.bwd_calls}) {
    if (p == &f.bwd_calls && !c.backward()) break;
    for (int n : {p->all_to_all, p->all_to_all_v, p->all_gather})
      calls.values.push_back(n);
    ++calls.rows;
  }
  rec.int_tables.push_back(std::move(calls));
  if (c.backward()) backward_figures(c, m, f, all, width, own, rec);
}

namespace {

// The sweep point leading each row: T, E, k, mlp, skew, its alpha or M, CF.
constexpr const char* kLeadHeader = "%7s %5s %2s %-6s %-4s %5s %5s ";
void print_lead(const CaseRecord& r) {
  const std::string skew = param_text(r, "skew");
  const double knob = skew == "zipf"  ? attr_number(r, "alpha")
                      : skew == "hot" ? attr_number(r, "hot_factor")
                                      : 0;
  std::printf("%7.0f %5.0f %2.0f %-6s %-4s %5.2f %5.2f ", attr_number(r, "tokens"),
              attr_number(r, "experts"), attr_number(r, "top_k"), param_text(r, "mlp").c_str(),
              skew.c_str(), knob, attr_number(r, "capacity_factor"));
}

const char* verdict(const CaseRecord& r) {
  const double passed = attr_number(r, "check_passed");
  return passed == 1  ? (attr_number(r, "bytes_match") == 1 ? "ok" : "BYTES")
         : passed < 0 ? "off"
                      : "FAIL";
}

double us(const CaseRecord& r, const std::string& name) {
  return attr_number(r, name) * 1e6;
}

void print_forward_table(const std::vector<const CaseRecord*>& records) {
  std::printf(
      "\nMoE layer forward (median step = max over ranks; times in us; bytes = dispatch + "
      "combine per rank; a/M = zipf alpha or hot factor; CF 0 = dropless)\n");
  std::printf(kLeadHeader, "T", "E", "k", "mlp", "skew", "a/M", "CF");
  std::printf("%9s %8s %8s %8s %8s %8s %6s %6s %6s %8s %11s %11s %6s %6s %5s\n", "step", "route",
              "permute", "dispatch", "expert", "combine", "max/mn", "drop%", "rank", "aux", "bytes",
              "pred_unif", "ratio", "pred", "check");
  for (const CaseRecord* r : records) {
    print_lead(*r);
    std::printf(
        "%9.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6.2f %6.2f %6.2f %8.5f %11.0f %11.0f %6.3f "
        "%6.3f %5s\n",
        us(*r, "time_median_s"), us(*r, "phase_route_median_s"), us(*r, "phase_permute_median_s"),
        us(*r, "phase_dispatch_median_s"), us(*r, "phase_expert_median_s"),
        us(*r, "phase_combine_median_s"), attr_number(*r, "expert_load_max_over_mean"),
        100 * attr_number(*r, "drop_rate"), attr_number(*r, "rank_load_max_over_mean"),
        attr_number(*r, "aux_loss"), attr_number(*r, "a2a_bytes_per_rank"),
        attr_number(*r, "pred_a2a_bytes_per_rank"), attr_number(*r, "a2a_expert_ratio"),
        attr_number(*r, "pred_a2a_expert_ratio"), verdict(*r));
  }
}

void print_step_table(const std::vector<const CaseRecord*>& records) {
  std::printf(
      "\nMoE layer training step, forward + backward (median step = max over ranks; times in us; "
      "bytes = dispatch + combine of both passes per rank; grad err = largest gradient error)\n");
  std::printf(kLeadHeader, "T", "E", "k", "mlp", "skew", "a/M", "CF");
  std::printf("%9s %9s %9s %8s %8s %8s %8s %8s %6s %6s %11s %11s %6s %6s %9s %5s\n", "step", "fwd",
              "bwd", "b_comb", "b_perm", "b_expert", "b_disp", "b_router", "drop%", "bw/fw",
              "bytes", "pred_unif", "ratio", "pred", "grad_err", "check");
  for (const CaseRecord* r : records) {
    print_lead(*r);
    const double grad_err = std::max({attr_number(*r, "grad_input_max_abs_err"),
                                      attr_number(*r, "grad_expert_weights_max_abs_err"),
                                      attr_number(*r, "grad_router_max_abs_err"),
                                      attr_number(*r, "grad_gate_max_abs_err")});
    std::printf(
        "%9.1f %9.1f %9.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6.2f %6.2f %11.0f %11.0f %6.3f "
        "%6.3f %9.2e %5s\n",
        us(*r, "time_median_s"), us(*r, "phase_forward_median_s"),
        us(*r, "phase_backward_median_s"), us(*r, "phase_bwd_combine_median_s"),
        us(*r, "phase_bwd_permute_median_s"), us(*r, "phase_bwd_expert_median_s"),
        us(*r, "phase_bwd_dispatch_median_s"), us(*r, "phase_bwd_router_median_s"),
        100 * attr_number(*r, "drop_rate"), attr_number(*r, "bwd_over_fwd_time"),
        attr_number(*r, "fwd_bwd_a2a_bytes_per_rank"),
        attr_number(*r, "pred_fwd_bwd_a2a_bytes_per_rank"), attr_number(*r, "bwd_a2a_expert_ratio"),
        attr_number(*r, "pred_bwd_a2a_expert_ratio"), grad_err, verdict(*r));
  }
}

}  // namespace

void print_moe_table(const std::vector<CaseRecord>& records) {
  // One row per case, led by its sweep coordinates so the rows of a sweep tell apart (the
  // case names are in the results file); a table per pass.
  std::vector<const CaseRecord*> forward, step;
  for (const auto& r : records)
    (param_text(r, "pass") == "fwd_bwd" ? step : forward).push_back(&r);
  if (!forward.empty()) print_forward_table(forward);
  if (!step.empty()) print_step_table(step);
}

}  // namespace suite::moe

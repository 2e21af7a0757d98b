// MeshCase's report against the formulas: the bytes each axis moved in one step beside
// METHODS.md 6, each axis's time and what nothing hid, the gradient sums and the check's errors.
#include <algorithm>
#include <cmath>
#include <map>

#include "bench/mesh/mesh_case_impl.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::mesh {

void MeshCase::report(const Measurement& m, CaseRecord& rec) {
  const int ranks = ctx_.mpi.size(), rank = ctx_.mpi.rank();
  const model::MeshBlock mb = model_shape();
  auto& a = rec.attrs;
  a.emplace_back("world", std::int64_t{ranks});
  a.emplace_back("expert_copies", std::int64_t{mesh_->layout().expert_copies()});
  // Bytes per axis: measured by each axis's communicators in one step, beside METHODS.md 6.
  const bool bwd = cfg_.backward();
  std::array<double, 4> pred = {model::mesh_tp_bytes(mb, bwd), model::mesh_cp_bytes(mb, bwd),
                                std::nan(""), bwd ? model::mesh_grad_sum_bytes(mb) : 0.0};
  // Two micro-batches: the second's LayerNorm gradients [4, h] all-reduced over TP by themselves.
  if (cfg_.two_batch && bwd)
    pred[0] += model::all_reduce_bytes_per_rank(4.0 * static_cast<double>(cfg_.h) * mb.e, mb.T);
  std::vector<std::int64_t> table;
  for (std::size_t i = 0; i < kAxes.size(); ++i) {
    const std::string axis = mesh_axis_name(kAxes[i]);
    const std::vector<std::int64_t> all = gather_int(step_bytes_[i], ranks, rank);
    table.insert(table.end(), all.begin(), all.end());
    const auto most = all_reduce_max(std::vector<std::int64_t>{step_bytes_[i], -step_bytes_[i]});
    a.emplace_back(axis + "_bytes_per_rank", static_cast<double>(most[0]));
    a.emplace_back(axis + "_bytes_per_rank_min", static_cast<double>(-most[1]));
    if (kAxes[i] != MeshAxis::ep) a.emplace_back("pred_" + axis + "_bytes_per_rank", pred[i]);
  }
  if (cfg_.moe()) {
    // The exact EP figure is the routing's (skew-free routing is still not uniform).
    const auto mism = all_reduce_max(
        std::vector<std::int64_t>{step_ep_implied_, step_bytes_[2] != step_ep_implied_ ? 1 : 0});
    a.emplace_back("pred_ep_bytes_per_rank", static_cast<double>(mism[0]));
    a.emplace_back("ep_bytes_equal_routing", std::int64_t{mism[1] == 0 ? 1 : 0});
    a.emplace_back("pred_ep_bytes_per_rank_uniform",
                   model::mesh_ep_bytes_uniform(mb, bwd) +
                       model::moe_control_bytes_fwd(cfg_.experts, cfg_.shape.ep, cfg_.top_k,
                                                    static_cast<double>(cfg_.sp_rows()), false));
  }
  rec.int_tables.push_back(
      {"axis_bytes_sent", kAxes.size(), static_cast<std::size_t>(ranks), table});
  if (MoeFfn* moe = block_->moe()) {
    // The router's choice in the last step, [T k, ranks]: each of a rank's tokens' k experts
    // (token-major), so that a reader counts the rows the EP bytes carry without the dispatch.
    const std::vector<std::int32_t> chosen = moe->chosen();
    const std::vector<std::int64_t> mine(chosen.begin(), chosen.end());
    rec.int_tables.push_back({"router_chosen_experts", mine.size(), static_cast<std::size_t>(ranks),
                              gather_int_columns(mine, ranks, rank)});
  }
  report_times(m, rec);
  const GradientSums& sums = block_->sums();
  a.emplace_back("grad_buckets", std::int64_t{sums.buckets(kSumDense) + sums.buckets(kSumExpert)});
  a.emplace_back("grad_sum_overlap", sums.bucketed()
                                         ? mesh_->dense_replicas().async_all_reduce(cfg_.dtype)
                                         : std::string("after the backward"));
  report_memory(rec, mb);
  for (const auto& [name, err] : check_errors_)
    a.emplace_back("check_err_" + name, err);
  if (cfg_.two_batch) report_two_batch(m, rec);
}

void MeshCase::report_times(const Measurement& m, CaseRecord& rec) {
  std::map<std::string, double> phase;
  for (const auto& [name, v] : m.phase_median_s)
    phase[name] = v;
  auto sum = [&](std::initializer_list<const char*> names) {
    double s = 0;
    for (const char* n : names)
      s += phase.count(n) ? phase.at(n) : 0.0;
    return s;
  };
  const double tp = sum({"fwd_comm", "bwd_comm", kSumTp});
  const double a2a = sum({"a2a_q", "a2a_k", "a2a_v", "a2a_out", "bwd_a2a_do", "bwd_a2a_dq",
                          "bwd_a2a_dk", "bwd_a2a_dv"});
  double cp = sum({"cp_attention", "bwd_cp_attention", "attention", "bwd_attention"}) + a2a;
  double cp_exposed = a2a + ring_wait_median();
  const double ep = sum({"dispatch", "combine", "bwd_combine", "bwd_dispatch"});
  const double dp = sum({kSumDense, kSumExpert, "grad_sum_start"});
  auto& a = rec.attrs;
  a.emplace_back("tp_time_s", tp);
  a.emplace_back("tp_exposed_s", tp);
  a.emplace_back("cp_time_s", cp);
  a.emplace_back("cp_exposed_s", cp_exposed);
  a.emplace_back("ep_time_s", ep);
  a.emplace_back("ep_exposed_s", ep);
  a.emplace_back("dp_time_s", dp);
  a.emplace_back("dp_exposed_s", dp);
  a.emplace_back("exposed_comm_s", tp + cp_exposed + ep + dp);
}

double MeshCase::ring_wait_median() {
  if (block_->attentions().empty()) return 0;
  const int per_step = cfg_.backward() ? 2 : 1;
  const std::size_t skip = static_cast<std::size_t>(std::max(0, ctx_.opts.warmup) * per_step);
  std::vector<double> steps;  // each step's waits, over its micro-batches' attentions
  for (const auto& cp : block_->attentions()) {
    const std::vector<ring::RoundTimes> runs = cp->collect_times();
    for (std::size_t i = skip, k = 0; i + static_cast<std::size_t>(per_step) <= runs.size();
         i += static_cast<std::size_t>(per_step), ++k) {
      double w = 0;
      for (int p = 0; p < per_step; ++p)
        for (double x : runs[i + static_cast<std::size_t>(p)].wait_s)
          w += x;
      if (k == steps.size()) steps.push_back(0);
      steps[k] += w;
    }
  }
  double median = 0;
  if (!steps.empty()) {
    std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2),
                     steps.end());
    median = steps[steps.size() / 2];
  }
  return all_reduce_max(median);
}

}  // namespace suite::mesh

// MoeCase's report against the formulas: the rank's facts for report_case, the dispatch levels,
// and the placement's rank loads beside the block placement's.
#include <mpi.h>

#include "bench/moe/moe_case_impl.hpp"
#include "bench/moe/moe_eplb.hpp"
#include "bench/moe/moe_levels_report.hpp"
#include "bench/moe/moe_report.hpp"
#include "common/device/device_peak.hpp"
#include "common/harness/errors.hpp"
#include "common/results/record_access.hpp"
#include "common/sim/sim.hpp"

namespace suite::moe {

void MoeCase::report(const Measurement& m, CaseRecord& rec) {
  RankFacts f;
  auto [kept, routed] = local_loads();
  f.group_kept = layer_->group_sum(kept);
  f.group_routed = layer_->group_sum(routed);
  const auto& p = layer_->prob_sum();
  f.group_prob_sum = layer_->group_sum(std::vector<double>(p.begin(), p.end()));
  f.measured = pipeline_ ? pipeline_->measured_bytes() : layer_->measured_bytes();
  f.implied = pipeline_ ? pipeline_->implied_bytes() : layer_->implied_bytes();
  f.expert_flops = layer_->expert_flops();
  for (auto n : layer_->recv_counts())
    f.recv_rows += static_cast<double>(n);
  for (auto k : pipeline_ ? pipeline_->keep() : layer_->keep())
    f.dropped += k ? 0 : 1;
  f.rates = rates_;
  f.fwd_calls = layer_->fwd_calls();
  if (cfg_.backward()) {
    f.bwd_measured = pipeline_ ? pipeline_->measured_bwd_bytes() : layer_->measured_bwd_bytes();
    f.bwd_implied = pipeline_ ? pipeline_->implied_bwd_bytes() : layer_->implied_bwd_bytes();
    f.bwd_expert_flops = layer_->bwd_expert_flops();
    f.bwd_calls = layer_->bwd_calls();
    if (grads_)
      f.grad_err = {grads_->input_err, grads_->weights_err, grads_->router_err, grads_->gate_err};
  }
  report_case(cfg_, m, f, balance_history_, rec);
  LevelFacts levels{{layer_->fwd_dispatch_levels(), layer_->fwd_combine_levels(),
                     layer_->bwd_combine_levels(), layer_->bwd_dispatch_levels()},
                    layer_->flat_intra_rows(),
                    layer_->flat_inter_rows(),
                    layer_->distinct_inter_rows(),
                    layer_->most_nodes_per_token()};
  report_levels(cfg_, levels, rec);
  report_placement(rec);
  if (pipeline_) report_overlap(m, rec);
  rec.attrs.emplace_back("router_logits",
                         std::string(sim::modeled() ? "drawn (modeled compute: x holds no values): "
                                                      "seeded per (global token, expert), sd 1"
                                                    : "computed: x W_router"));
  if (sim::modeled() && !cfg_.dropless())
    rec.attrs.emplace_back("modeled_drops",
                           std::string("settled before timing by each expert's owner (same "
                                       "rule); the steps all-gather the routing as "
                                       "placeholders (same bytes)"));
  add_peak_attrs(rec.attrs, gpu_peak_flops(ctx_.device.name(), cfg_.dtype),
                 {{"calib_flops_per_s", attr_number(rec, "calib_flops_per_s")},
                  {"expert_flops_per_s", attr_number(rec, "expert_flops_per_s")}});
}

void MoeCase::report_placement(CaseRecord& rec) {
  double mm[2] = {0, 0};
  if (cfg_.redundant_experts > 0) {
    for (int i = 0; i < 2; ++i) {
      mm[i] = rank_load_max_over_mean(
          i == 0 ? block_placement(cfg_.experts, cfg_.n_e) : layer_->placement(), group_load_);
    }
  }
  double worst[2] = {0, 0};
  SUITE_MPI_CHECK(MPI_Allreduce(mm, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  if (cfg_.redundant_experts == 0 || ctx_.mpi.rank() != 0) return;
  rec.attrs.emplace_back("redundant_experts", std::int64_t{cfg_.redundant_experts});
  rec.attrs.emplace_back("block_rank_load_max_over_mean", worst[0]);
  rec.attrs.emplace_back("pred_rank_load_max_over_mean", worst[1]);
  const ExpertPlacement& p = layer_->placement();
  rec.int_tables.push_back({"slot_expert", 1, p.slot_expert.size(),
                            std::vector<std::int64_t>(p.slot_expert.begin(), p.slot_expert.end())});
}

}  // namespace suite::moe

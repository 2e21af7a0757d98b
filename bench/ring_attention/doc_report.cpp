#include "bench/ring_attention/doc_report.hpp"

#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "bench/ring_attention/ring_pass_report.hpp"
#include "common/harness/errors.hpp"
#include "common/results/record_access.hpp"
#include "common/transport/mpi_env.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::ring {
namespace {

constexpr std::int64_t kMaxSavedRows = 1 << 20;  // row_positions: small runs only

}  // namespace

WorkTotals report_documents(const RingConfig& cfg, const RingAttention& ring,
                            const std::vector<std::int64_t>& rows, CaseRecord& rec) {
  if (!cfg.docs) return {};
  int ranks = 0, rank = 0;
  SUITE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  SUITE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  const PackedDocuments& d = *cfg.docs;
  auto& a = rec.attrs;
  a.emplace_back("docs_longest", d.longest());
  a.emplace_back("docs_mean_length", static_cast<double>(d.tokens()) / d.count());
  a.emplace_back("docs_cut_tokens", d.cut_tokens());
  // Padding (doc_zigzag): slots that travel and take memory but hold no token.
  a.emplace_back("docs_pad_slots", d.pad_slots());
  a.emplace_back("docs_padding_fraction", static_cast<double>(d.pad_slots()) / d.slots());
  const WorkTotals totals = work_totals(ring.work_pairs());
  const std::int64_t sum = totals.sum, most = totals.most;
  double lockstep = 0;  // every round waits for its busiest rank
  for (auto w : totals.busiest)
    lockstep += static_cast<double>(w);
  const double mean = static_cast<double>(sum) / ranks;
  a.emplace_back("work_pairs_total", sum / (ranks / cfg.n_c));
  a.emplace_back("lockstep_pairs", lockstep);
  a.emplace_back("work_max_over_mean", mean > 0 ? static_cast<double>(most) / mean : NAN);
  a.emplace_back("pred_efficiency_balance", most > 0 ? mean / static_cast<double>(most) : NAN);
  a.emplace_back("pred_efficiency_lockstep", lockstep > 0 ? mean / lockstep : NAN);
  const auto cols = static_cast<std::size_t>(ranks);
  const RingAttention::BlockCensus census = ring.block_census();
  const auto rounds = static_cast<std::size_t>(cfg.n_c);
  // Block pairs over the ranks of one ring (every ring of a hybrid has the same), as the model
  // counts them.
  auto ring_total = [&](const std::vector<std::int64_t>& per_round) {
    return work_totals(per_round).sum / (ranks / cfg.n_c);
  };
  a.emplace_back("blocks_skipped", ring_total(census.skipped));
  a.emplace_back("blocks_masked", ring_total(census.masked));
  a.emplace_back("blocks_whole", ring_total(census.whole));
  rec.int_tables.push_back({"cu_seqlens", 1, d.cu_seqlens().size(), d.cu_seqlens()});
  if (d.pad_slots() > 0)
    rec.int_tables.push_back(
        {"cu_seqlens_padded", 1, d.cu_seqlens_padded().size(), d.cu_seqlens_padded()});
  // Which global position each rank's rows hold ([rows, ranks]), so an outside checker can
  // rebuild every block's mask.
  if (static_cast<std::int64_t>(rows.size()) * ranks <= kMaxSavedRows)
    rec.int_tables.push_back(
        {"row_positions", rows.size(), cols, gather_int_columns(rows, ranks, rank)});
  rec.int_tables.push_back(
      {"round_blocks_skipped", rounds, cols, gather_int_columns(census.skipped, ranks, rank)});
  rec.int_tables.push_back(
      {"round_blocks_masked", rounds, cols, gather_int_columns(census.masked, ranks, rank)});
  rec.int_tables.push_back(
      {"round_kernel_calls", rounds, cols, gather_int_columns(census.calls, ranks, rank)});
  return totals;
}

void print_documents_table(const std::vector<CaseRecord>& records) {
  bool any = false;
  for (const auto& r : records)
    any = any || std::isfinite(attr_number(r, "work_max_over_mean"));
  if (!any) return;
  std::printf(
      "\nPacked documents: counted from the layout (work max/mean, padding, block pairs of one "
      "ring skipped / masked /\nwhole, pred_bal = mean / max, pred_lock = mean / lockstep) beside "
      "the measured efficiency against the ideal\n(eff_ideal: forward, or the step with --pass "
      "fwd_bwd) and the bytes each rank sent in a forward\n");
  std::printf("%-62s %8s %8s %9s %8s %8s %8s %9s %9s %12s\n", "case", "max/mean", "padding",
              "skipped", "masked", "whole", "pred_bal", "pred_lock", "eff_ideal", "bytes/rank");
  for (const auto& r : records) {
    if (!std::isfinite(attr_number(r, "work_max_over_mean"))) continue;
    double eff = attr_number(r, "efficiency_vs_ideal_fwd");
    if (param_text(r, "pass") == "fwd_bwd") eff = attr_number(r, "efficiency_vs_ideal_fwd_bwd");
    double bytes = attr_number(r, "bytes_sent_per_rank_per_layer");            // ring_attention
    if (!std::isfinite(bytes)) bytes = attr_number(r, "bytes_sent_per_rank");  // ulysses
    std::printf("%-62s %8.3f %7.2f%% %9.0f %8.0f %8.0f %8.4f %9.4f %9.2f %12.0f\n", r.name.c_str(),
                attr_number(r, "work_max_over_mean"), 100 * attr_number(r, "docs_padding_fraction"),
                attr_number(r, "blocks_skipped"), attr_number(r, "blocks_masked"),
                attr_number(r, "blocks_whole"), attr_number(r, "pred_efficiency_balance"),
                attr_number(r, "pred_efficiency_lockstep"), eff, bytes);
  }
}

}  // namespace suite::ring

// The figures one pass of a ring-attention case reports (the forward, and with --pass fwd_bwd
// the backward too): F and W measured in the same run (compute only, transfer only), the
// overlapped time predicted from them round by round, exposed communication, and the per-rank
// per-round compute / wait / transfer / work tables, and why the pass reaches its efficiency
// against the ideal. The backward's names carry a `bwd_` prefix; the forward's are the ones
// every earlier results file has.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/ring_attention/ring_attention.hpp"
#include "common/results/results.hpp"

namespace suite::ring {

// One mode's timed steps: per-iteration local times, the same as max over ranks, per round.
struct ModeRuns {
  std::vector<double> local, step;
  std::vector<RoundTimes> rounds;
  double median() const;
};

// What one pass measured on this rank.
struct PassRuns {
  double t_over = 0;              // median overlapped time of the pass (max over ranks)
  std::vector<RoundTimes> timed;  // the overlapped steps' per-round times
  ModeRuns compute, transfer;     // the pass alone, compute only and transfer only
  std::int64_t bytes_sent = 0;    // this rank, one overlapped step of the pass
};

// How the pass counts: work and bytes per round (R entries: the backward's last round is the
// home hop of the dK/dV partial sums, with no work).
struct PassCount {
  std::string prefix;               // "" (forward) or "bwd_"
  double flops_per_pair = 0;        // per visible (query, key) pair over all heads
  std::vector<std::int64_t> work;   // this rank's visible pairs per round
  std::vector<double> round_bytes;  // bytes the exchange started in each round moves
  bool overlapped_rounds = true;    // ring: a round lasts max(compute, transfer); else sum
};

struct PassRates {
  double F = 0, W = 0;                   // measured FLOP/s (busiest rank) and bytes/s
  double t_comp = 0, t_xfer = 0;         // compute-only and transfer-only medians
  double mean_pairs = 0, max_pairs = 0;  // visible pairs per rank: mean and busiest
};

// The ranks' visible pairs: each round's busiest rank, and the sum and maximum over ranks of
// their totals (collective: every rank calls it).
struct WorkTotals {
  std::vector<std::int64_t> busiest;  // per round
  std::int64_t sum = 0, most = 0;
};
WorkTotals work_totals(const std::vector<std::int64_t>& work);

// Writes the pass's efficiency factors against the ideal (ring_efficiency.hpp) as `eff_*`, or
// `bwd_eff_*` for the backward (prefix "bwd_"); the caller writes the efficiency itself.
void report_efficiency_factors(const std::string& prefix, const PassRates& rates, int n_c,
                               double ideal_s, double t_over, CaseRecord& rec);

// Writes the pass's attributes and tables into rec (collective: every rank calls it).
PassRates report_pass(const PassCount& count, const PassRuns& runs, int n_c, CaseRecord& rec);

// Per round, the median over steps of one series.
std::vector<double> round_medians(const std::vector<RoundTimes>& runs,
                                  std::vector<double> RoundTimes::*series, int rounds);

}  // namespace suite::ring

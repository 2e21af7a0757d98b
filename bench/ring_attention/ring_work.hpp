// The exact work of a ring schedule from the layout and the documents alone, without tensors:
// every rank's visible (query, key) pairs in every round, and the balance they predict. The
// benchmarks count the same pairs block by block while they run; `model --section varlen`
// prints these figures for any distribution, N_c and layout without running anything.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/ring_attention/ring_config.hpp"

namespace suite::ring {

struct RingWork {
  int n_c = 0;
  // Round k, rank r: r's queries against the K/V block of ring_source(r, k, n_c) (one sequence).
  std::vector<std::int64_t> pairs;  // [k * n_c + r]
  // Block pairs over all rounds and ranks, as the benchmarks' census counts them: (query run,
  // key run) pairs of the layout's runs, those with a visible pair and those with every pair
  // visible; the rest are skipped (not computed) and the visible but not whole ones masked.
  std::int64_t blocks = 0, blocks_visible = 0, blocks_whole = 0;

  std::int64_t at(int round, int rank) const {
    return pairs[static_cast<std::size_t>(round) * n_c + rank];
  }
  std::vector<std::int64_t> rank_totals() const;
  std::int64_t total() const;
  std::int64_t most() const;  // the busiest rank's total
  // Sum over rounds of the round's busiest rank: the ring's time in pair units (every rank waits
  // for the slowest before the next block arrives).
  std::int64_t lockstep() const;
  double mean() const { return static_cast<double>(total()) / n_c; }
  double max_over_mean() const;
  // mean / most: any schedule that waits only once, at the end (the all-gather variant).
  double efficiency_balance() const;
  // mean / lockstep: the ring.
  double efficiency_lockstep() const;
  std::int64_t blocks_skipped() const { return blocks - blocks_visible; }
  std::int64_t blocks_masked() const { return blocks_visible - blocks_whole; }
};

// From token_segments(cfg, r) for every rank: a query run is matched only with the key runs
// that can share a document with it (O(pairs of runs that do)); striped is counted per
// document in closed form with difference arrays, O(n_c (documents + n_c)), so that N_c of a
// thousand ranks takes well under a second.
RingWork ring_work(const RingConfig& cfg);

}  // namespace suite::ring

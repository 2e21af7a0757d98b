// The balanced layout's groups of ranks (balanced_groups.hpp).
#include "bench/layouts/balanced_groups.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace suite::ring::balanced {
namespace {

// A level (the documents cut over g ranks) with fewer documents than this per group position
// (n_c / g of them) is moved up to the next g: too few to even out the rounds only its groups
// reach (lognormal:256:1 at 1024 ranks: 0.989 of the ideal lockstep with 2, 0.992 with 16).
constexpr std::int64_t kDocsPerGroupPosition = 16;
// A document moved up keeps chunks of at least this many tokens (16 instead: 0.968 of the
// ideal lockstep at 1024 ranks with lognormal:256:1 against 0.992, sparse levels staying),
// whatever --balanced-chunk asks: with 128, 4 ranks and lognormal:256:1 documents, keeping
// chunks of 128 there left the ranks' work at 1.27 of the mean, against 1.01 moved up.
constexpr std::int64_t kMoveUpMinChunk = 4;

}  // namespace

// Ranks a cut document goes over: one of n_c's divisors (ascending; its group every n_c / g-th
// rank, so that every rank of it works in the same rounds), the largest up to `want`, at least
// `need`.
std::int64_t group_size(const std::vector<std::int64_t>& divisors, std::int64_t want,
                        std::int64_t need) {
  std::int64_t g = 1;
  for (std::int64_t x : divisors)
    if (x <= want || g < need) g = x;
  return g;
}

// The group position (first rank, of n_c / g) of every document cut over g < n_c ranks, by
// level: a document weighs the same on each rank of its group in each of its rounds, so the
// rounds only its level and those above reach are as even as its documents' work is over the
// n_c / g positions. Heaviest first to the lightest position, then swaps between the heaviest
// and the lightest while one narrows their gap. -1 for the rest. Placing each document at the
// position whose rounds' peaks rise least instead (until 2026-12-04) left the positions a
// document's work apart (lognormal:256:1 at 128 ranks of 8K: even ranks 500 pairs above odd
// ones in the rounds only documents over 64 and 128 ranks reach; 0.99518 of the ideal
// lockstep, 0.99806 with this, 0.99525 striped) and took 0.5 s at 512 ranks (0.14 s now).
std::vector<int> group_positions(const std::vector<std::size_t>& heaviest_first,
                                 const std::vector<std::int64_t>& groups,
                                 const std::vector<std::int64_t>& work,
                                 const std::vector<std::int64_t>& divisors, int n_c) {
  std::vector<int> first_of(groups.size(), -1);
  for (std::int64_t g : divisors) {
    const auto positions = static_cast<std::size_t>(n_c / g);
    if (g == 1 || positions == 1) continue;
    std::vector<std::vector<std::size_t>> docs_at(positions);
    std::vector<std::int64_t> load(positions, 0);
    for (std::size_t d : heaviest_first) {
      if (groups[d] != g) continue;
      const auto p =
          static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      docs_at[p].push_back(d);
      load[p] += work[d];
    }
    for (bool narrowed = true; narrowed;) {
      narrowed = false;
      const auto hi =
          static_cast<std::size_t>(std::max_element(load.begin(), load.end()) - load.begin());
      const auto lo =
          static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      const std::int64_t gap = load[hi] - load[lo];
      std::int64_t best_gap = gap;
      std::size_t take = 0, give = 0;
      for (std::size_t i = 0; i < docs_at[hi].size(); ++i)
        for (std::size_t j = 0; j < docs_at[lo].size(); ++j) {
          const std::int64_t moved = work[docs_at[hi][i]] - work[docs_at[lo][j]];
          if (moved > 0 && std::abs(gap - 2 * moved) < best_gap)
            best_gap = std::abs(gap - 2 * moved), take = i, give = j, narrowed = true;
        }
      if (!narrowed) break;
      const std::int64_t moved = work[docs_at[hi][take]] - work[docs_at[lo][give]];
      std::swap(docs_at[hi][take], docs_at[lo][give]);
      load[hi] -= moved;
      load[lo] += moved;
    }
    for (std::size_t p = 0; p < positions; ++p)
      for (std::size_t d : docs_at[p])
        first_of[d] = static_cast<int>(p);
  }
  return first_of;
}

// One wait (the group-cast): every rank of a cut document's group receives nearly all of the
// document's K/V, so a document is cut only where it must be: over the fewest ranks (a divisor
// of n_c) whose share of it fits a rank (c tokens) and weighs no more than what a rank has left
// for whole documents, their work over n_c (the cut ones spread over every rank); cutting one
// leaves less for the rest, so until no more needs it. Every other one stays whole on one rank
// and sends nothing.
std::vector<std::int64_t> groups_for_one_wait(const std::vector<std::int64_t>& work,
                                              const std::vector<std::int64_t>& length,
                                              const std::vector<std::int64_t>& divisors, int n_c,
                                              std::int64_t c) {
  std::vector<std::int64_t> groups(work.size(), 1);
  for (bool changed = true; changed;) {
    changed = false;
    double whole = 0;
    for (std::size_t d = 0; d < work.size(); ++d)
      whole += groups[d] == 1 ? static_cast<double>(work[d]) : 0.0;
    const double room = std::max(whole / n_c, 1.0);
    for (std::size_t d = 0; d < work.size(); ++d) {
      if (groups[d] > 1) continue;
      const std::int64_t need = std::min(
          std::max({std::int64_t{1},
                    static_cast<std::int64_t>(std::ceil(static_cast<double>(work[d]) / room)),
                    (length[d] + c - 1) / c}),
          std::max<std::int64_t>(1, length[d] / 2));
      if (need > 1) groups[d] = group_size(divisors, need, need), changed = true;
    }
  }
  return groups;
}

// The ring's groups. How many ranks each document goes over (1: whole), set once, when it is first
// cut (letting it grow as the share below falls evened rounds out less: 0.9895 against 0.9945 at
// 512 ranks with lognormal:256:1). Every one long enough for two ranks' chunks of min_chunk tokens
// is cut, over as many ranks as such chunks allow: a cut document's work is spread over its group's
// ranks and rounds, while a whole one's falls in round 0 of one rank, which the documents' lengths
// rarely fill evenly. A shorter one is cut too where it would not fit (longer than c) or where its
// work alone exceeds a rank's share of round 0 (the whole documents' work plus 1 / g of the cut
// ones', over n_c ranks), over no more ranks than its tokens fill one per chunk. Levels too sparse
// to even out their rounds then move up (from the smallest g).
std::vector<std::int64_t> groups_for_ring(const std::vector<std::int64_t>& work,
                                          const std::vector<std::int64_t>& length,
                                          const std::vector<std::int64_t>& divisors, int n_c,
                                          std::int64_t c, std::int64_t min_chunk) {
  const std::size_t count = work.size();
  std::vector<std::int64_t> groups(count, 1);
  for (bool changed = true; changed;) {
    double round0 = 0;
    for (std::size_t d = 0; d < count; ++d)
      round0 += static_cast<double>(work[d]) / static_cast<double>(groups[d]);
    const double share = std::max(round0 / n_c, 1.0);
    changed = false;
    for (std::size_t d = 0; d < count; ++d) {
      if (groups[d] > 1) continue;
      const std::int64_t need = std::min(
          std::max<std::int64_t>(
              {1, static_cast<std::int64_t>(std::ceil(static_cast<double>(work[d]) / share)),
               (length[d] + c - 1) / c}),
          std::max<std::int64_t>(1, length[d] / 2));
      const std::int64_t g =
          group_size(divisors, std::max(length[d] / (2 * min_chunk), need), need);
      if (g > 1) groups[d] = g, changed = true;
    }
  }
  for (std::int64_t g = 2; g < n_c; ++g) {
    if (n_c % g != 0) continue;
    const auto at_level = std::count(groups.begin(), groups.end(), g);
    if (at_level == 0 || at_level >= kDocsPerGroupPosition * (n_c / g)) continue;
    const std::int64_t up = group_size(divisors, g, g + 1);
    for (std::size_t d = 0; d < count; ++d)
      if (groups[d] == g && length[d] >= 2 * kMoveUpMinChunk * up) groups[d] = up;
  }
  return groups;
}

}  // namespace suite::ring::balanced

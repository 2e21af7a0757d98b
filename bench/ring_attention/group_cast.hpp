// The group-cast variant's traffic (METHODS.md section 2, "Group-cast"): each rank's K/V rows go
// only to the ranks whose queries see them, and each rank receives only those. Which rows those
// are follows from the layout and the documents alone: ring_attention's plan finds them for its
// own queries while it runs, group_cast_traffic() for every rank at once (`model --section
// varlen`), and the two must agree to the row.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "bench/ring_attention/ring_config.hpp"

namespace suite::ring {

// Rows [first, first + count) of a rank's block (local rows), sorted and disjoint in a list.
struct RowRange {
  std::int64_t first = 0, count = 0;
};
using RowRanges = std::vector<RowRange>;

// The keys of key run k that some query of run q can see: k's sub-run inside key_window(q),
// with its local offset. Exact where q runs over consecutive positions (every layout but
// striped: every key in the window shares a document with a query of q at or after it); for a
// strided q (striped) the window holds keys no query sees too. Call it for pairs with a visible
// pair only.
Segment visible_key_run(const Segment& q, const Segment& k, bool causal,
                        const PackedDocuments* docs, std::int64_t s);

// Sorts the ranges and merges those that overlap or touch.
RowRanges merge_ranges(RowRanges ranges);
std::int64_t rows_in(const RowRanges& ranges);

struct GroupCastTraffic {
  int n_c = 0;
  // [receiver * n_c + source]: rows of source's block that receiver's queries see (none on the
  // diagonal: a rank's own block does not travel).
  std::vector<std::int64_t> rows;

  std::int64_t at(int receiver, int source) const {
    return rows[static_cast<std::size_t>(receiver) * n_c + source];
  }
  std::int64_t received(int rank) const;  // rows, over all sources
  std::int64_t sent(int rank) const;      // rows, over all receivers (one copy each)
  int sources(int rank) const;            // ranks it receives from
  std::int64_t most_received() const;
  std::int64_t most_sent() const;
  // The ranks' largest K/V receipt from one source (rows).
  std::int64_t largest_message() const;
  // Rows of rank's largest batch (group_cast_batches over its sources in ring order): each of
  // its two slots holds that many rows of K and as many of V.
  std::int64_t largest_batch(int rank, std::int64_t c) const;
  // Whether the group-cast saves the busiest rank nothing (group_cast_falls_back): then the
  // ring's schedule runs.
  bool falls_back(std::int64_t c) const;
};

// Whether the busiest rank's rows (the more it sends or receives) are what the ring makes every
// rank send, (n_c - 1) c rows (every key of every other rank is seen: one document, or striped's
// strided runs): there the ring's hops between neighbours move the same bytes with fewer, larger
// messages, and the group-cast runs the ring's schedule.
bool group_cast_falls_back(std::int64_t busiest_rows, int n_c, std::int64_t c);

// The batches a rank's sources arrive in: consecutive sources (in the ring's order, those it
// needs rows of) while their rows fit one block of c; the batch of each source, from 0.
std::vector<int> group_cast_batches(const std::vector<std::int64_t>& rows, std::int64_t c);

// Every rank's needs of every other rank's rows under cfg's layout (cfg.n_c ranks), in O(pairs of
// runs that share a document) as ring_work counts them (striped: one run a rank, n_c^2 pairs).
GroupCastTraffic group_cast_traffic(const RingConfig& cfg);

}  // namespace suite::ring

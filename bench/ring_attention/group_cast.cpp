#include "bench/ring_attention/group_cast.hpp"

#include <algorithm>
#include <tuple>

#include "bench/ring_attention/ring_work.hpp"

namespace suite::ring {

Segment visible_key_run(const Segment& q, const Segment& k, bool causal,
                        const PackedDocuments* docs, std::int64_t s) {
  const auto [lo, hi] = key_window(q, causal, docs, s);
  if (k.count == 0 || hi < k.first() || lo > k.last())
    return {k.local_offset, k.start, k.stride, 0};
  // Indices j of k with lo <= start + j stride <= hi.
  const std::int64_t j0 = lo <= k.start ? 0 : (lo - k.start + k.stride - 1) / k.stride;
  const std::int64_t j1 = std::min(k.count - 1, (hi - k.start) / k.stride);
  return {k.local_offset + j0, k.position(j0), k.stride, std::max<std::int64_t>(0, j1 - j0 + 1)};
}

RowRanges merge_ranges(RowRanges ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const RowRange& a, const RowRange& b) { return a.first < b.first; });
  RowRanges out;
  for (const RowRange& r : ranges) {
    if (r.count <= 0) continue;
    if (!out.empty() && r.first <= out.back().first + out.back().count)
      out.back().count =
          std::max(out.back().first + out.back().count, r.first + r.count) - out.back().first;
    else
      out.push_back(r);
  }
  return out;
}

std::int64_t rows_in(const RowRanges& ranges) {
  std::int64_t n = 0;
  for (const RowRange& r : ranges)
    n += r.count;
  return n;
}

std::int64_t GroupCastTraffic::received(int rank) const {
  std::int64_t n = 0;
  for (int s = 0; s < n_c; ++s)
    n += at(rank, s);
  return n;
}

std::int64_t GroupCastTraffic::sent(int rank) const {
  std::int64_t n = 0;
  for (int r = 0; r < n_c; ++r)
    n += at(r, rank);
  return n;
}

int GroupCastTraffic::sources(int rank) const {
  int n = 0;
  for (int s = 0; s < n_c; ++s)
    n += at(rank, s) > 0;
  return n;
}

std::int64_t GroupCastTraffic::most_received() const {
  std::int64_t n = 0;
  for (int r = 0; r < n_c; ++r)
    n = std::max(n, received(r));
  return n;
}

std::int64_t GroupCastTraffic::most_sent() const {
  std::int64_t n = 0;
  for (int r = 0; r < n_c; ++r)
    n = std::max(n, sent(r));
  return n;
}

std::int64_t GroupCastTraffic::largest_message() const {
  return rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end());
}

std::int64_t GroupCastTraffic::largest_batch(int rank, std::int64_t c) const {
  std::vector<std::int64_t> rows;
  for (int k = 1; k < n_c; ++k)
    if (const std::int64_t n = at(rank, ring_source(rank, k, n_c)); n > 0) rows.push_back(n);
  const std::vector<int> batch = group_cast_batches(rows, c);
  std::vector<std::int64_t> filled(batch.empty() ? 0 : static_cast<std::size_t>(batch.back()) + 1);
  for (std::size_t i = 0; i < rows.size(); ++i)
    filled[static_cast<std::size_t>(batch[i])] += rows[i];
  return filled.empty() ? 0 : *std::max_element(filled.begin(), filled.end());
}

bool GroupCastTraffic::falls_back(std::int64_t c) const {
  return group_cast_falls_back(std::max(most_sent(), most_received()), n_c, c);
}

bool group_cast_falls_back(std::int64_t busiest_rows, int n_c, std::int64_t c) {
  return n_c > 1 && busiest_rows >= static_cast<std::int64_t>(n_c - 1) * c;
}

std::vector<int> group_cast_batches(const std::vector<std::int64_t>& rows, std::int64_t c) {
  std::vector<int> out;
  std::int64_t filled = 0;
  int batch = -1;
  for (std::int64_t n : rows) {
    if (batch < 0 || filled + n > c) ++batch, filled = 0;
    filled += n;
    out.push_back(batch);
  }
  return out;
}

namespace {

// The runs attention computes on, as RingAttention takes them: without a causal mask or
// documents every pair is visible and the block is one run.
std::vector<Segment> runs_of(const RingConfig& cfg, int rank) {
  if (cfg.causal || cfg.docs) return token_segments(cfg, rank);
  return {{0, 0, 1, cfg.c}};
}

// Striped: one strided run a rank, every pair of ranks a candidate; whether a pair sees
// anything comes from ring_work's closed form (a per-document count for each of n_c^2 pairs
// would take minutes at 512 ranks).
GroupCastTraffic striped_traffic(const RingConfig& cfg) {
  const int n = cfg.n_c;
  GroupCastTraffic t{n, std::vector<std::int64_t>(static_cast<std::size_t>(n) * n, 0)};
  const RingWork w = ring_work(cfg);
  std::vector<Segment> run(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    run[static_cast<std::size_t>(r)] = runs_of(cfg, r).front();
  for (int r = 0; r < n; ++r)
    for (int k = 1; k < n; ++k) {
      if (w.at(k, r) == 0) continue;
      const int src = ring_source(r, k, n);
      t.rows[static_cast<std::size_t>(r) * n + src] =
          visible_key_run(run[static_cast<std::size_t>(r)], run[static_cast<std::size_t>(src)],
                          cfg.causal, cfg.documents(), cfg.s())
              .count;
    }
  return t;
}

}  // namespace

GroupCastTraffic group_cast_traffic(const RingConfig& cfg) {
  if (cfg.layout == Layout::striped && cfg.n_c > 1 && (cfg.causal || cfg.docs))
    return striped_traffic(cfg);
  const int n = cfg.n_c;
  const PackedDocuments* docs = cfg.documents();
  GroupCastTraffic t{n, std::vector<std::int64_t>(static_cast<std::size_t>(n) * n, 0)};
  struct Run {
    Segment seg;
    int rank;
  };
  std::vector<Run> keys;  // every rank's runs, by first position (consecutive: by last too)
  for (int r = 0; r < n; ++r)
    for (const Segment& s : runs_of(cfg, r))
      if (s.count > 0) keys.push_back({s, r});
  std::sort(keys.begin(), keys.end(),
            [](const Run& a, const Run& b) { return a.seg.first() < b.seg.first(); });
  std::vector<std::pair<int, RowRange>> wanted;  // (source, rows) of one receiver
  for (int r = 0; r < n; ++r) {
    wanted.clear();
    for (const Segment& q : runs_of(cfg, r)) {
      if (q.count == 0) continue;
      const auto [lo, hi] = key_window(q, cfg.causal, docs, cfg.s());
      auto it = std::partition_point(keys.begin(), keys.end(),
                                     [&](const Run& k) { return k.seg.last() < lo; });
      for (; it != keys.end() && it->seg.first() <= hi; ++it) {
        if (it->rank == r || visible_pairs(q, it->seg, cfg.causal, docs) == 0) continue;
        const Segment v = visible_key_run(q, it->seg, cfg.causal, docs, cfg.s());
        wanted.push_back({it->rank, {v.local_offset, v.count}});
      }
    }
    std::sort(wanted.begin(), wanted.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first, a.second.first) < std::tie(b.first, b.second.first);
    });
    for (std::size_t i = 0; i < wanted.size();) {
      const int src = wanted[i].first;
      RowRanges ranges;
      for (; i < wanted.size() && wanted[i].first == src; ++i)
        ranges.push_back(wanted[i].second);
      t.rows[static_cast<std::size_t>(r) * n + src] = rows_in(merge_ranges(std::move(ranges)));
    }
  }
  return t;
}

}  // namespace suite::ring

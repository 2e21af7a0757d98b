#include "bench/ring_attention/ring_work.hpp"

#include <algorithm>

namespace suite::ring {

std::vector<std::int64_t> RingWork::rank_totals() const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n_c), 0);
  for (int k = 0; k < n_c; ++k)
    for (int r = 0; r < n_c; ++r)
      out[static_cast<std::size_t>(r)] += at(k, r);
  return out;
}

std::int64_t RingWork::total() const {
  std::int64_t n = 0;
  for (auto p : pairs)
    n += p;
  return n;
}

std::int64_t RingWork::most() const {
  const auto t = rank_totals();
  return t.empty() ? 0 : *std::max_element(t.begin(), t.end());
}

std::int64_t RingWork::lockstep() const {
  std::int64_t n = 0;
  for (int k = 0; k < n_c; ++k) {
    std::int64_t busiest = 0;
    for (int r = 0; r < n_c; ++r)
      busiest = std::max(busiest, at(k, r));
    n += busiest;
  }
  return n;
}

double RingWork::max_over_mean() const {
  return total() > 0 ? static_cast<double>(most()) / mean() : 0.0;
}

double RingWork::efficiency_balance() const {
  return most() > 0 ? mean() / static_cast<double>(most()) : 0.0;
}

double RingWork::efficiency_lockstep() const {
  return lockstep() > 0 ? mean() / static_cast<double>(lockstep()) : 0.0;
}

namespace {

// A run of one rank's tokens.
struct Run {
  Segment seg;
  int rank;
};

// Runs of consecutive tokens (every layout but striped): every token lies on one rank, so the
// runs sorted by their first position are sorted by their last too, and the key runs a query
// run can see are the ones overlapping its key_window.
RingWork consecutive_runs(const RingConfig& cfg, std::vector<Run> runs) {
  const int n = cfg.n_c;
  const PackedDocuments* docs = cfg.documents();
  RingWork w{n, std::vector<std::int64_t>(static_cast<std::size_t>(n) * n, 0)};
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.seg.first() < b.seg.first(); });
  for (const Run& q : runs) {
    const auto [lo, hi] = key_window(q.seg, cfg.causal, docs, cfg.s());
    auto it = std::partition_point(runs.begin(), runs.end(),
                                   [&](const Run& k) { return k.seg.last() < lo; });
    for (; it != runs.end() && it->seg.first() <= hi; ++it) {
      const int round =
          ((q.rank - it->rank) % n + n) % n;  // ring_source(q.rank, round) == it->rank
      const std::int64_t v = visible_pairs(q.seg, it->seg, cfg.causal, docs);
      w.pairs[static_cast<std::size_t>(round) * n + q.rank] += v;
      w.blocks_visible += v > 0;
      w.blocks_whole += v > 0 && v == q.seg.count * it->seg.count;
    }
  }
  return w;
}

// Striped (rank r holds the positions p = r mod n): for a document of L tokens from position a,
// rank r's queries are its tokens i = rho + m n (rho = (r - a) mod n, m < M(rho), M(x) = L / n +
// [x < L mod n]) and in round k it holds the keys j = sigma mod n, sigma = (rho - k) mod n. A
// causal query i sees m + [k <= rho] of them, M(rho) (M(rho) - 1) / 2 + M(rho) [k <= rho] in all;
// full attention M(rho) M(sigma). Both are constant between the breakpoints rho = L mod n, k and
// k + L mod n, so each (round, document) adds a few constant runs over the ranks (rotated by a)
// into a difference array.
RingWork striped(const RingConfig& cfg) {
  const std::int64_t n = cfg.n_c;
  const PackedDocuments* docs = cfg.documents();
  RingWork w{cfg.n_c, std::vector<std::int64_t>(static_cast<std::size_t>(n * n), 0)};
  const std::int64_t documents = docs ? docs->count() : 1;
  std::vector<std::int64_t> diff(static_cast<std::size_t>(n + 1));
  auto add = [&](std::int64_t from, std::int64_t len, std::int64_t v) {  // ranks from.. (mod n)
    const std::int64_t first = std::min(len, n - from);
    diff[static_cast<std::size_t>(from)] += v;
    diff[static_cast<std::size_t>(from + first)] -= v;
    if (len > first) {
      diff[0] += v;
      diff[static_cast<std::size_t>(len - first)] -= v;
    }
  };
  for (std::int64_t k = 0; k < n; ++k) {
    std::fill(diff.begin(), diff.end(), 0);
    for (std::int64_t d = 0; d < documents; ++d) {
      const std::int64_t a = docs ? docs->start(d) : 0, len = docs ? docs->length(d) : cfg.s();
      const std::int64_t whole = len / n, rem = len % n;
      auto count = [&](std::int64_t x) { return whole + (x < rem ? 1 : 0); };
      auto work = [&](std::int64_t rho) {
        const std::int64_t m = count(rho);
        if (cfg.causal) return m * (m - 1) / 2 + (k <= rho ? m : 0);
        return m * count(((rho - k) % n + n) % n);
      };
      std::int64_t cuts[] = {0, rem, k, (k + rem) % n, n};
      std::sort(std::begin(cuts), std::end(cuts));
      for (int i = 0; i + 1 < 5; ++i) {
        if (cuts[i + 1] <= cuts[i]) continue;
        if (const std::int64_t v = work(cuts[i]); v != 0)
          add((cuts[i] + a) % n, cuts[i + 1] - cuts[i], v);
      }
    }
    std::int64_t run = 0;
    for (std::int64_t r = 0; r < n; ++r) {
      run += diff[static_cast<std::size_t>(r)];
      w.pairs[static_cast<std::size_t>(k * n + r)] = run;
      // One strided run per rank: one block pair per round, whole only if all c x c are seen.
      w.blocks_visible += run > 0;
      w.blocks_whole += run > 0 && run == cfg.c * cfg.c;
    }
  }
  return w;
}

}  // namespace

RingWork ring_work(const RingConfig& cfg) {
  if (cfg.layout == Layout::striped && cfg.n_c > 1) {
    RingWork w = striped(cfg);
    w.blocks = static_cast<std::int64_t>(cfg.n_c) * cfg.n_c;
    return w;
  }
  std::vector<Run> runs;
  std::int64_t all_runs = 0;  // empty ones too: the census pairs every run with every run
  for (int r = 0; r < cfg.n_c; ++r)
    for (const Segment& s : token_segments(cfg, r)) {
      ++all_runs;
      if (s.count > 0) runs.push_back({s, r});
    }
  RingWork w = consecutive_runs(cfg, std::move(runs));
  w.blocks = all_runs * all_runs;  // over the rounds each rank meets every rank's runs once
  return w;
}

}  // namespace suite::ring

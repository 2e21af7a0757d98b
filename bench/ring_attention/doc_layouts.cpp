#include "bench/ring_attention/doc_layouts.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.hpp"

namespace suite::ring {
namespace {

// Runs (start, count) in global order, merged where they touch, as segments with local offsets.
std::vector<Segment> as_segments(std::vector<std::pair<std::int64_t, std::int64_t>> runs) {
  std::sort(runs.begin(), runs.end());
  std::vector<Segment> out;
  std::int64_t local = 0;
  for (const auto& [start, count] : runs) {
    if (count <= 0) continue;
    if (!out.empty() && out.back().start + out.back().count == start)
      out.back().count += count;
    else
      out.push_back({local, start, 1, count});
    local += count;
  }
  return out;
}

}  // namespace

std::int64_t query_work(const PackedDocuments& docs, std::int64_t d, std::int64_t a, std::int64_t b,
                        bool causal) {
  if (b <= a) return 0;
  if (!causal) return (b - a) * docs.length(d);
  const std::int64_t lo = a - docs.start(d) + 1, hi = b - docs.start(d);  // 1-based in the doc
  return (lo + hi) * (hi - lo + 1) / 2;
}

std::vector<std::int64_t> slot_positions(const RankLayout& layout) {
  std::vector<std::int64_t> pos;
  for (const Segment& s : layout.slots)
    for (std::int64_t i = 0; i < s.count; ++i)
      pos.push_back(s.position(i));
  return pos;
}

RankLayout doc_zigzag_layout(const PackedDocuments& docs, int rank, int n_c) {
  const std::int64_t chunks = 2 * static_cast<std::int64_t>(n_c);
  if (docs.pad_to() % chunks != 0)
    throw std::logic_error("doc_zigzag: documents must be padded to a multiple of 2 n_c");
  RankLayout out;
  std::int64_t local = 0;
  for (std::int64_t d = 0; d < docs.count(); ++d) {
    const std::int64_t h = (docs.slot_end(d) - docs.start(d)) / chunks;
    for (std::int64_t j : {static_cast<std::int64_t>(rank), chunks - 1 - rank}) {
      const std::int64_t cs = docs.start(d) + j * h;
      if (!out.slots.empty() && out.slots.back().start + out.slots.back().count == cs)
        out.slots.back().count += h;
      else
        out.slots.push_back({local, cs, 1, h});
      const std::int64_t a = std::max(cs, docs.start(d)), b = std::min(cs + h, docs.end(d));
      if (b > a) {
        if (!out.tokens.empty() && out.tokens.back().start + out.tokens.back().count == a &&
            out.tokens.back().local_offset + out.tokens.back().count == local + (a - cs))
          out.tokens.back().count += b - a;
        else
          out.tokens.push_back({local + (a - cs), a, 1, b - a});
      }
      local += h;
    }
  }
  return out;
}

std::vector<RankLayout> balanced_layout(const PackedDocuments& docs, int n_c, std::int64_t c,
                                        bool causal) {
  if (docs.pad_slots() != 0 || docs.slots() != c * n_c)
    throw std::logic_error("balanced: documents must fill the n_c c slots without padding");
  const auto ranks = static_cast<std::size_t>(n_c);
  const std::int64_t chunks = 2 * static_cast<std::int64_t>(n_c);
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> runs(ranks);
  std::vector<std::int64_t> tokens(ranks, 0), work(ranks, 0);
  auto give = [&](std::size_t r, std::int64_t d, std::int64_t a, std::int64_t n) {
    runs[r].push_back({a, n});
    tokens[r] += n;
    work[r] += query_work(docs, d, a, a + n, causal);
  };

  // Which documents are cut: every one of 2 n_c tokens or more, and every one whose work alone
  // exceeds a rank's share of round 0, where all of a whole document's work falls (about the
  // whole documents' work plus 1 / n_c of the cut ones', over n_c ranks): placed whole, such a
  // document would set round 0's time by itself.
  std::vector<char> cut(static_cast<std::size_t>(docs.count()));
  std::vector<std::int64_t> doc_work(cut.size());
  for (std::int64_t d = 0; d < docs.count(); ++d) {
    doc_work[static_cast<std::size_t>(d)] = query_work(docs, d, docs.start(d), docs.end(d), causal);
    cut[static_cast<std::size_t>(d)] = docs.length(d) >= chunks;
  }
  for (bool changed = true; changed;) {
    double round0 = 0;
    for (std::size_t d = 0; d < cut.size(); ++d)
      round0 += static_cast<double>(doc_work[d]) / (cut[d] ? n_c : 1);
    changed = false;
    for (std::size_t d = 0; d < cut.size(); ++d)
      if (!cut[d] && static_cast<double>(doc_work[d]) > round0 / n_c) cut[d] = changed = true;
  }
  std::vector<std::int64_t> whole;
  for (std::int64_t d = 0; d < docs.count(); ++d) {
    const std::int64_t len = docs.length(d);
    if (!cut[static_cast<std::size_t>(d)]) {
      whole.push_back(d);
      continue;
    }
    // Mirrored chunks; the len mod 2 n_c extra tokens go one at a time to the rank holding the
    // fewest tokens (the least work among equals; at most one per chunk), which keeps every
    // rank's count within one of the others'.
    const std::int64_t q = len / chunks;
    std::vector<int> extra(ranks, 0);
    for (std::int64_t left = len % chunks; left > 0; --left) {
      std::size_t best = ranks;
      for (std::size_t r = 0; r < ranks; ++r)
        if (extra[r] < 2 &&
            (best == ranks || tokens[r] + extra[r] < tokens[best] + extra[best] ||
             (tokens[r] + extra[r] == tokens[best] + extra[best] && work[r] < work[best])))
          best = r;
      ++extra[best];
    }
    std::int64_t at = docs.start(d);
    for (std::int64_t j = 0; j < chunks; ++j) {
      const auto r = static_cast<std::size_t>(j < n_c ? j : chunks - 1 - j);
      const std::int64_t n = q + (j < n_c ? extra[r] >= 1 : extra[r] == 2);
      if (n == 0) continue;  // a document shorter than 2 n_c leaves some chunks empty
      give(r, d, at, n);
      at += n;
    }
  }
  // The rest whole, heaviest first, to the least-loaded rank with room; split only where no
  // rank has room for all of it. A split puts its pieces on consecutive ranks r, r + 1, ...
  // (the later piece after the earlier one), so that a piece's queries meet the earlier pieces'
  // keys in round 1 (2, ...): every split's cross-rank work lands in the same few rounds, on
  // ranks that have taken the least of it, instead of each adding its own round's peak to the
  // ring's lockstep.
  std::stable_sort(whole.begin(), whole.end(), [&](std::int64_t x, std::int64_t y) {
    return query_work(docs, x, docs.start(x), docs.end(x), causal) >
           query_work(docs, y, docs.start(y), docs.end(y), causal);
  });
  std::vector<std::int64_t> split_work(ranks, 0);  // cross-rank work of splits, by query rank
  for (std::int64_t d : whole) {
    std::int64_t at = docs.start(d), left = docs.length(d);
    std::size_t best = ranks;
    for (std::size_t r = 0; r < ranks; ++r)
      if (c - tokens[r] >= left && (best == ranks || work[r] < work[best])) best = r;
    if (best != ranks) {
      give(best, d, at, left);
      continue;
    }
    // The first piece on a rank with room whose successor has room too and the least split
    // work so far (any rank with room where no such pair is left).
    std::size_t first = ranks;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::size_t next = (r + 1) % ranks;
      if (tokens[r] >= c || (ranks > 1 && tokens[next] >= c)) continue;
      if (first == ranks || split_work[next] < split_work[(first + 1) % ranks]) first = r;
    }
    for (std::size_t r = 0; first == ranks && r < ranks; ++r)
      if (tokens[r] < c) first = r;
    if (first == ranks) throw std::logic_error("balanced: no rank has room left");
    const std::int64_t begin = at;
    for (std::size_t r = first; left > 0; r = (r + 1) % ranks) {
      const std::int64_t n = std::min(left, c - tokens[r]);
      if (n <= 0) continue;
      // The piece's queries against the keys of the pieces before it (causal: all of them).
      split_work[r] += causal ? n * (at - begin) : 0;
      give(r, d, at, n);
      at += n;
      left -= n;
    }
  }
  std::vector<RankLayout> out(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    if (tokens[r] != c)
      throw std::logic_error("balanced: rank " + std::to_string(r) + " holds " +
                             std::to_string(tokens[r]) + " tokens, not " + std::to_string(c));
    out[r].tokens = as_segments(std::move(runs[r]));
    out[r].slots = out[r].tokens;
  }
  return out;
}

std::vector<RankLayout> document_layout(Layout l, const PackedDocuments& docs, int n_c,
                                        std::int64_t c, bool causal) {
  std::vector<RankLayout> out;
  if (l == Layout::doc_zigzag) {
    for (int r = 0; r < n_c; ++r)
      out.push_back(doc_zigzag_layout(docs, r, n_c));
    return out;
  }
  if (l == Layout::balanced) return balanced_layout(docs, n_c, c, causal);
  throw std::logic_error("document_layout: " + std::string(layout_name(l)) +
                         " is not a document layout");
}

}  // namespace suite::ring

// The suite's work-balanced layout over packed documents (doc_layouts.hpp says what it
// promises). It plans against the ring's time in pair units, the sum over rounds of each
// round's busiest rank, keeping every rank's visible pairs per round in a table as it places.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "bench/layouts/balanced_groups.hpp"
#include "bench/layouts/doc_layouts.hpp"
#include "common/harness/errors.hpp"

namespace suite::ring {
namespace {

// Tokens per chunk of a cut document, at least (fewer where c is under 1K, so that a rank
// still holds 64 such chunks): the pairs between two chunks of q and q + 1 tokens differ by
// (1 + 1/q)^2, so chunks of one or two tokens (a short document over many ranks) leave rounds
// uneven however they are placed, while long chunks leave few, coarse pieces to place.
// lognormal:256:1 at 512 ranks: 0.99 of the lockstep's ideal at 16, 0.98 at 32; cut over all
// ranks in chunks of one or two tokens, 0.87.
constexpr std::int64_t kMinChunkTokens = 16;
// A cut document's chunks of this many tokens or more take its extra tokens one to a rank, in
// its middle (each a run of its own on most of those ranks); lighter ones take them two to a
// rank, at the ends of its chunks (no run of their own). A middle token weighs q on its rank
// where a pair weighs 2q, so the finer pieces even out the ranks where one document is most of
// the pack (pareto:256:1.1 at 8 ranks of 8K, seed 2: one of 36,152 tokens; 0.99967 of the ideal
// lockstep in pairs, 0.999996 in middle tokens). From 64 tokens instead, the runs per rank grow
// from 75 to 90 (pareto:256:1.1, 4 ranks of 8K; 76 from 256), with balanced ahead of striped at
// the same 105 of 105 points (five seeds, three distributions, 4 to 256 ranks).
constexpr std::int64_t kMiddleTokensMinChunk = 256;

using Runs = std::vector<std::pair<std::int64_t, std::int64_t>>;  // (first position, tokens)
using Pieces = std::vector<std::pair<int, std::pair<std::int64_t, std::int64_t>>>;  // rank, run

class Planner {
 public:
  // one_wait: plan for a schedule that waits once (BalanceTarget::one_wait): every pair of
  // runs counts in one cell per rank (round 0), so the sum of the rounds' peaks is the busiest
  // rank's total, and a cut document's group is g consecutive ranks.
  Planner(const PackedDocuments& docs, int n_c, std::int64_t c, bool causal, bool one_wait)
      : docs_(docs),
        n_(n_c),
        c_(c),
        causal_(causal),
        one_wait_(one_wait),
        load_(static_cast<std::size_t>(n_c) * n_c, 0),
        peak_(static_cast<std::size_t>(n_c), 0),
        tokens_(static_cast<std::size_t>(n_c), 0),
        runs_(static_cast<std::size_t>(n_c)),
        extra_weight_(static_cast<std::size_t>(n_c) + 1) {}

  // Cuts document d into 2g mirrored chunks over the g ranks first, first + n_c / g, ...: first
  // = `position` (group_positions; every rank of the group works on it in the same rounds, the
  // multiples of n_c / g) where its ranks have room, else the first (of n_c / g) that adds least
  // to the sum of the rounds' peaks (ties: the least loaded cells). False when no first leaves
  // room on every rank of the group.
  bool place_cut(std::int64_t d, int g, int position) {
    stride_ = n_ / g;
    if (position >= 0) {
      Chunks ch = chunks(d, g, position);
      if (!ch.early.empty()) {
        commit(d, ch, position);
        return true;
      }
    }
    int best = -1;
    std::pair<std::int64_t, std::int64_t> best_cost{};
    Chunks best_chunks;
    for (int first = 0; first < stride_; ++first) {
      Chunks ch = chunks(d, g, first);
      if (ch.early.empty()) continue;
      const auto cost = placement_cost(ch, first);
      if (best < 0 || cost < best_cost) best = first, best_cost = cost, best_chunks = std::move(ch);
    }
    if (best < 0) return false;
    commit(d, best_chunks, best);
    return true;
  }

  // Document d whole on the rank with room whose round 0 (where all of its work falls) is
  // lightest. Where no rank has room for all of it, in pieces over several ranks: either on
  // consecutive ranks (their pairs across ranks land in rounds 1, 2, ...) or over the ranks
  // with the most room, each piece halved and the halves mirrored as a cut document's chunks,
  // whichever raises the rounds' peaks least. Over five seeds of three distributions at 4 to
  // 256 ranks of 8K, balanced is then ahead of striped at 105 of 105 points, at 103 always
  // mirrored and 99 always consecutive (pareto:256:1.1 at 4 ranks, seed 3: 0.99996 of the
  // ideal lockstep, 0.99930 consecutive), though consecutive alone does better with short
  // documents at 512 ranks (lognormal:256:1: 0.9960 against 0.9953).
  void place_whole(std::int64_t d) {
    const std::int64_t at = docs_.start(d), len = docs_.length(d);
    int best = -1;
    for (int r = 0; r < n_; ++r)
      if (c_ - tokens_[r] >= len && (best < 0 || cell(0, r) < cell(0, best))) best = r;
    if (best >= 0) {
      give(best, at, len);
      add(0, best, query_work(docs_, d, at, at + len, causal_));
      return;
    }
    const Pieces in_a_row = consecutive_pieces(d), mirrored = mirrored_pieces(d);
    const Pieces& pick = rise(mirrored) < rise(in_a_row) ? mirrored : in_a_row;
    for (const auto& [r, run] : pick)
      give(r, run.first, run.second);
    for (const auto& [qr, q] : pick)
      for (const auto& [kr, k] : pick)
        add(round_between(qr, kr), qr, run_pairs(q, k));
  }

  std::vector<RankLayout> layout() && {
    std::vector<RankLayout> out(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      if (tokens_[r] != c_)
        throw std::logic_error("balanced: rank " + std::to_string(r) + " holds " +
                               std::to_string(tokens_[r]) + " tokens, not " + std::to_string(c_));
      out[r].tokens = segments_of_runs(std::move(runs_[r]), docs_);
      out[r].slots = out[r].tokens;
    }
    return out;
  }

 private:
  // Chunk sizes by group index i: early chunk i, then the middle tokens, then late chunk
  // 2g - 1 - i (index g - 1's middle tokens first, next to its early chunk, then 0, 1, ...).
  // Index i sits at group position (i + rot) % g, rank first + that n_c / g.
  struct Chunks {
    std::vector<std::int64_t> early, middle, late;
    int rot = 0;
    bool has_middle = false;
  };

  // Where the L mod 2g extra tokens of a document cut in chunks of q go decides how even its
  // rounds are: a rank holding one more token of it in the middle (or two, one at the end of
  // each chunk) has about q (2q) more pairs against every other rank of the group, and gives
  // as many to each rank that receives its block. So each rank keeps the weight of the extra
  // tokens it holds, q each, per group stride, and the extra tokens go where that weight is
  // least: where it is equal across a group, so are its rounds. A single one goes to index
  // g - 1's early chunk, the document's middle (elsewhere it would weigh q against half the
  // group's ranks and 2q or 0 against the others). By token count only where by weight leaves
  // a rank of the group without room for them.
  Chunks chunks(std::int64_t d, int g, int first) const {
    Chunks ch = chunks_by_weight(d, g, first);
    return ch.early.empty() ? chunks_by_count(d, g, first) : ch;
  }

  Chunks chunks_by_weight(std::int64_t d, int g, int first) const {
    const std::int64_t len = docs_.length(d), q = len / (2 * g), r = len % (2 * g);
    Chunks ch{std::vector<std::int64_t>(g, q), std::vector<std::int64_t>(g, 0),
              std::vector<std::int64_t>(g, q)};
    // Group positions, the least extra weight first (ties: the fewest tokens, then the first);
    // only as many sorted as the extra tokens can use, the rest where room runs short.
    std::vector<int> pos(static_cast<std::size_t>(g));
    std::iota(pos.begin(), pos.end(), 0);
    auto rank_at = [&](int p) { return rank(first, p); };
    auto lighter = [&](int a, int b) {
      const std::int64_t wa = weight(rank_at(a)), wb = weight(rank_at(b));
      if (wa != wb) return wa < wb;
      const std::int64_t ta = tokens_[rank_at(a)], tb = tokens_[rank_at(b)];
      return ta != tb ? ta < tb : a < b;
    };
    std::size_t sorted =
        std::min<std::size_t>(static_cast<std::size_t>(g), static_cast<std::size_t>(r) + 1);
    std::partial_sort(pos.begin(), pos.begin() + static_cast<std::ptrdiff_t>(sorted), pos.end(),
                      lighter);
    auto sort_all = [&] {
      std::sort(pos.begin() + static_cast<std::ptrdiff_t>(sorted), pos.end(), lighter);
      sorted = pos.size();
    };
    std::vector<std::int64_t> extra(static_cast<std::size_t>(g), 0);  // by position
    auto room = [&](int p, std::int64_t n) { return tokens_[rank_at(p)] + 2 * q + n <= c_; };
    int middle_at = -1;  // the position whose index becomes g - 1
    if (q >= kMiddleTokensMinChunk) {
      for (std::int64_t k = 0; k < r; ++k) {
        const int p = pos[static_cast<std::size_t>(k % g)];
        if (!room(p, extra[p] + 1)) return {};
        ++extra[p];
      }
      if (r > 0) middle_at = pos[0];
    } else {
      std::int64_t pairs = r / 2;
      for (std::size_t k = 0; k < pos.size() && (pairs > 0 || (r % 2 == 1 && middle_at < 0)); ++k) {
        if (k == sorted) sort_all();
        const int p = pos[k];
        if (pairs > 0 && room(p, 2))
          extra[p] = 2, --pairs;
        else if (r % 2 == 1 && middle_at < 0 && room(p, 1))
          middle_at = p, extra[p] = 1;
      }
      if (pairs > 0 || (r % 2 == 1 && middle_at < 0)) return {};
    }
    for (int p = 0; p < g; ++p)
      if (!room(p, extra[p])) return {};
    ch.rot = middle_at >= 0 ? (middle_at + 1) % g : 0;
    for (int p = 0; p < g; ++p) {
      const int i = ((p - ch.rot) % g + g) % g;
      if (q >= kMiddleTokensMinChunk)
        ch.middle[i] = extra[p], ch.has_middle |= extra[p] > 0;
      else if (extra[p] == 2)
        ++ch.early[i], ++ch.late[i];
      else if (extra[p] == 1)
        ++ch.early[i];  // i = g - 1: the middle
    }
    return ch;
  }

  // The extra tokens two at a time (one to each chunk) to the group's rank holding fewest
  // tokens that has room for them; one at a time where no rank has room for two or one is
  // left. Empty when the group has no room for them all.
  Chunks chunks_by_count(std::int64_t d, int g, int first) const {
    const std::int64_t len = docs_.length(d), q = len / (2 * g);
    Chunks ch{std::vector<std::int64_t>(g, q), std::vector<std::int64_t>(g, 0),
              std::vector<std::int64_t>(g, q)};
    auto held = [&](int i) { return tokens_[rank(first, i)] + ch.early[i] + ch.late[i]; };
    for (std::int64_t left = len % (2 * g); left > 0;) {
      int pick = -1;
      std::int64_t take = 0;
      for (std::int64_t want = std::min<std::int64_t>(left, 2); want > 0 && pick < 0; --want)
        for (int i = 0; i < g; ++i) {
          const std::int64_t room = (ch.early[i] == q) + (ch.late[i] == q);
          if (room >= want && held(i) + want <= c_ && (pick < 0 || held(i) < held(pick)))
            pick = i, take = want;
        }
      if (pick < 0) return {};
      if (ch.early[pick] == q) ++ch.early[pick], --take, --left;
      if (take > 0) ++ch.late[pick], --left;
    }
    for (int i = 0; i < g; ++i)
      if (held(i) > c_) return {};
    return ch;
  }

  // Visible pairs of group index i's queries against index j's keys. Causal, in the document's
  // order (early chunks, middle tokens, late chunks in reverse): early chunk i sees early j < i;
  // middle tokens see every early chunk and the middle tokens before them; late chunk i sees
  // every early chunk and middle token and late j > i.
  std::int64_t chunk_pairs(const Chunks& ch, int i, int j) const {
    const std::int64_t xi = ch.early[i], yi = ch.late[i], xj = ch.early[j], yj = ch.late[j];
    if (!ch.has_middle) {  // the common case, and the planner's inner loop: kept short
      if (!causal_) return (xi + yi) * (xj + yj);
      if (i == j) return xi * (xi + 1) / 2 + yi * (yi + 1) / 2 + yi * xi;
      return i > j ? xj * (xi + yi) : yi * (xj + yj);
    }
    const std::int64_t mi = ch.middle[i], mj = ch.middle[j];
    if (!causal_) return (xi + mi + yi) * (xj + mj + yj);
    if (i == j)
      return xi * (xi + 1) / 2 + mi * (mi + 1) / 2 + yi * (yi + 1) / 2 + mi * xi + yi * (xi + mi);
    const int g = static_cast<int>(ch.early.size());
    const bool j_middle_first = j == g - 1 || (i != g - 1 && j < i);
    const std::int64_t middles = j_middle_first ? mi * mj : 0;
    return middles + (i > j ? xj * (xi + mi + yi) + yi * mj : yi * (xj + mj + yj) + mi * xj);
  }

  // (added to the sum of the rounds' peaks, sum of the touched cells before).
  std::pair<std::int64_t, std::int64_t> placement_cost(const Chunks& ch, int first) {
    const int g = static_cast<int>(ch.early.size());
    std::int64_t filled = 0;
    for (int i = 0; i < g; ++i) {
      const int r = rank(first, (i + ch.rot) % g);
      if (one_wait_) {  // all of rank r's pairs of the document land in its one cell
        std::int64_t pairs = 0;
        for (int j = 0; j < g; ++j)
          pairs += chunk_pairs(ch, i, j);
        filled += cell(0, r);
        new_peak_[0] = std::max({new_peak_[0], peak_[0], cell(0, r) + pairs});
        continue;
      }
      for (int j = 0; j < g; ++j) {
        const int k = (i >= j ? i - j : i - j + g) * stride_;  // round_of(i, j)
        const std::int64_t now = cell(k, r);
        filled += now;
        new_peak_[k] = std::max({new_peak_[k], peak_[k], now + chunk_pairs(ch, i, j)});
      }
    }
    std::int64_t rise = 0;
    for (int m = 0; m < g; ++m) {  // the rounds touched: the multiples of n_c / g
      const int k = m * stride_;
      rise += new_peak_[k] - peak_[k];
      new_peak_[k] = peak_[k];  // resets the scratch for the next call
    }
    return {rise, filled};
  }

  void commit(std::int64_t d, const Chunks& ch, int first) {
    const int g = static_cast<int>(ch.early.size());
    auto rank_of = [&](int i) { return rank(first, (i + ch.rot) % g); };
    std::int64_t at = docs_.start(d);
    auto give_next = [&](int i, std::int64_t n) {
      give(rank_of(i), at, n);
      at += n;
    };
    for (int i = 0; i < g; ++i)
      give_next(i, ch.early[i]);
    give_next(g - 1, ch.middle[g - 1]);
    for (int i = 0; i < g - 1; ++i)
      give_next(i, ch.middle[i]);
    for (int i = g - 1; i >= 0; --i)
      give_next(i, ch.late[i]);
    for (int i = 0; i < g; ++i)
      for (int j = 0; j < g; ++j)
        add(round_of(i, j), rank_of(i), chunk_pairs(ch, i, j));
    const std::int64_t q = docs_.length(d) / (2 * g);
    std::vector<std::int64_t>& w = extra_weight_[static_cast<std::size_t>(stride_)];
    if (w.empty()) w.assign(static_cast<std::size_t>(n_), 0);
    for (int i = 0; i < g; ++i)
      w[rank_of(i)] += q * (ch.early[i] + ch.middle[i] + ch.late[i] - 2 * q);
  }

  // The first piece on the rank with room whose round 0 is lightest, the next ones on r + 1,
  // r + 2, ...
  Pieces consecutive_pieces(std::int64_t d) const {
    std::int64_t at = docs_.start(d), left = docs_.length(d);
    int best = -1;
    for (int r = 0; r < n_; ++r)
      if (tokens_[r] < c_ && (best < 0 || cell(0, r) < cell(0, best))) best = r;
    if (best < 0) throw std::logic_error("balanced: no rank has room left");
    Pieces out;
    for (int r = best; left > 0; r = (r + 1) % n_) {
      const std::int64_t n = std::min(left, c_ - tokens_[r]);
      if (n <= 0) continue;
      out.push_back({r, {at, n}});
      at += n;
      left -= n;
    }
    return out;
  }

  // A piece on each of the ranks with the most room, as much as it holds, in rank order; each
  // piece's first half early, its second half late, the late halves in reverse rank order.
  Pieces mirrored_pieces(std::int64_t d) const {
    std::int64_t at = docs_.start(d), left = docs_.length(d);
    std::vector<int> by_room(static_cast<std::size_t>(n_));
    std::iota(by_room.begin(), by_room.end(), 0);
    std::stable_sort(by_room.begin(), by_room.end(),
                     [&](int a, int b) { return tokens_[a] < tokens_[b]; });
    std::vector<std::pair<int, std::int64_t>> share;  // rank, tokens
    for (int r : by_room) {
      if (left == 0 || tokens_[r] >= c_) break;
      share.push_back({r, std::min(left, c_ - tokens_[r])});
      left -= share.back().second;
    }
    if (left > 0) throw std::logic_error("balanced: no rank has room left");
    std::sort(share.begin(), share.end());
    Pieces out;
    for (const auto& [r, n] : share) {
      out.push_back({r, {at, n / 2}});
      at += n / 2;
    }
    for (auto it = share.rbegin(); it != share.rend(); ++it) {
      out.push_back({it->first, {at, it->second - it->second / 2}});
      at += it->second - it->second / 2;
    }
    return out;
  }

  // What placing these pieces would add to the sum of the rounds' peaks.
  std::int64_t rise(const Pieces& pieces) const {
    std::map<std::pair<int, int>, std::int64_t> added;  // (round, rank): pairs
    for (const auto& [qr, q] : pieces)
      for (const auto& [kr, k] : pieces)
        added[{round_between(qr, kr), qr}] += run_pairs(q, k);
    std::map<int, std::int64_t> peak;  // round: its peak after
    for (const auto& [at, w] : added) {
      auto it = peak.try_emplace(at.first, peak_[at.first]).first;
      it->second = std::max(it->second, cell(at.first, at.second) + w);
    }
    std::int64_t out = 0;
    for (const auto& [k, p] : peak)
      out += p - peak_[k];
    return out;
  }

  // Pairs of a query run against a key run of the same document.
  std::int64_t run_pairs(std::pair<std::int64_t, std::int64_t> q,
                         std::pair<std::int64_t, std::int64_t> k) const {
    if (!causal_) return q.second * k.second;
    if (k.first > q.first) return 0;
    if (k.first < q.first) return q.second * k.second;  // runs of one document never overlap
    return q.second * (q.second + 1) / 2;
  }

  std::int64_t weight(int r) const {
    const auto& w = extra_weight_[static_cast<std::size_t>(stride_)];
    return w.empty() ? 0 : w[r];
  }
  // Group rank i of the group at position `first`: n_c / g apart for the ring (all of them
  // work on the document in the same rounds), consecutive for one wait (inside one node where
  // g divides a node's ranks, so its traffic stays there).
  int rank(int first, int i) const {
    return one_wait_ ? first * (n_ / stride_) + i : (first + i * stride_) % n_;
  }
  int round_of(int i, int j) const {
    const int g = n_ / stride_;
    return one_wait_ ? 0 : ((i - j) % g + g) % g * stride_;
  }
  int round_between(int query_rank, int key_rank) const {
    return one_wait_ ? 0 : ((query_rank - key_rank) % n_ + n_) % n_;
  }
  std::int64_t cell(int k, int r) const { return load_[static_cast<std::size_t>(k) * n_ + r]; }
  void add(int k, int r, std::int64_t w) {
    std::int64_t& x = load_[static_cast<std::size_t>(k) * n_ + r];
    x += w;
    peak_[k] = std::max(peak_[k], x);
    new_peak_[k] = peak_[k];
  }
  void give(int r, std::int64_t at, std::int64_t n) {
    if (n <= 0) return;
    runs_[r].push_back({at, n});
    tokens_[r] += n;
  }

  const PackedDocuments& docs_;
  int n_;
  std::int64_t c_;
  bool causal_, one_wait_;
  std::vector<std::int64_t> load_;  // [round * n + rank]: visible pairs
  std::vector<std::int64_t> peak_;  // per round: its busiest rank's
  std::vector<std::int64_t> new_peak_ = peak_;
  std::vector<std::int64_t> tokens_;
  std::vector<Runs> runs_;
  // [n_c / g][rank]: q of each extra token of the documents cut over g ranks it holds
  std::vector<std::vector<std::int64_t>> extra_weight_;
  int stride_ = 1;  // n_c / g of the document being placed
};

}  // namespace

std::int64_t balanced_min_chunk(std::int64_t c, std::int64_t requested) {
  if (requested < 0)
    throw UsageError("--balanced-chunk " + std::to_string(requested) +
                     " must be >= 1 (tokens), or 0 for the default");
  return requested > 0 ? requested : std::clamp<std::int64_t>(c / 64, 1, kMinChunkTokens);
}

std::vector<RankLayout> balanced_layout(const PackedDocuments& docs, int n_c, std::int64_t c,
                                        bool causal, std::int64_t requested_chunk,
                                        BalanceTarget target) {
  if (docs.pad_slots() != 0 || docs.slots() != c * n_c)
    throw std::logic_error("balanced: documents must fill the n_c c slots without padding");
  const auto count = static_cast<std::size_t>(docs.count());
  const std::int64_t min_chunk = balanced_min_chunk(c, requested_chunk);
  std::vector<std::int64_t> work(count), length(count);
  for (std::size_t d = 0; d < count; ++d) {
    const auto doc = static_cast<std::int64_t>(d);
    work[d] = query_work(docs, doc, docs.start(doc), docs.end(doc), causal);
    length[d] = docs.length(doc);
  }

  std::vector<std::int64_t> divisors;
  for (std::int64_t x = 1; x <= n_c; ++x)
    if (n_c % x == 0) divisors.push_back(x);
  const bool one_wait = target == BalanceTarget::one_wait;
  const std::vector<std::int64_t> groups =
      one_wait ? balanced::groups_for_one_wait(work, length, divisors, n_c, c)
               : balanced::groups_for_ring(work, length, divisors, n_c, c, min_chunk);

  // Heaviest first, the cut documents before the whole ones (which then fill what room is left).
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return work[x] > work[y]; });
  // One wait: each cut document to the group whose busiest rank it raises least (the levels'
  // positions, partitioned each on its own, would all start at rank 0).
  const std::vector<int> first_of =
      one_wait ? std::vector<int>(count, -1)
               : balanced::group_positions(order, groups, work, divisors, n_c);
  Planner plan(docs, n_c, c, causal, one_wait);
  std::vector<std::int64_t> whole;
  for (std::size_t d : order)
    if (groups[d] == 1 ||
        !plan.place_cut(static_cast<std::int64_t>(d), static_cast<int>(groups[d]), first_of[d]))
      whole.push_back(static_cast<std::int64_t>(d));
  for (std::int64_t d : whole)
    plan.place_whole(d);
  return std::move(plan).layout();
}

}  // namespace suite::ring

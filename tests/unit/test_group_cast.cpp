// The group-cast's traffic from the layout alone (group_cast.hpp), against a hand count and a
// brute-force count over the document mask (the keys of each rank that some query of another
// rank sees), and what balanced does for it: documents cut only where they must be, over
// consecutive ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_work.hpp"
#include "tests/unit/ring_test_config.hpp"

namespace suite::ring {
namespace {

// Tokens of `source` that some query of `receiver` sees: same document (the whole sequence
// without documents) and, causal, at or before it.
std::int64_t brute_seen(const RingConfig& cfg, int receiver, int source) {
  auto doc = [&](std::int64_t p) { return cfg.docs ? cfg.docs->document_of(p) : 0; };
  const std::vector<std::int64_t> queries = tokens_of(cfg, receiver);
  std::int64_t n = 0;
  for (std::int64_t k : tokens_of(cfg, source))
    n += std::any_of(queries.begin(), queries.end(),
                     [&](std::int64_t q) { return doc(q) == doc(k) && (!cfg.causal || k <= q); });
  return n;
}

TEST(GroupCast, HandCountContiguousTwoRanks) {
  // Documents [0, 3), [3, 9), [9, 16) over two ranks of 8: the middle one crosses.
  for (bool causal : {true, false}) {
    RingConfig cfg;
    cfg.n_c = 2;
    cfg.c = 8;
    cfg.causal = causal;
    cfg.docs = std::make_shared<const PackedDocuments>(PackedDocuments::from_lengths({3, 6, 7}));
    const GroupCastTraffic t = group_cast_traffic(cfg);
    // Rank 1's query 8 sees keys 3..7 of rank 0; with full attention rank 0's queries 3..7 also
    // see key 8 of rank 1.
    EXPECT_EQ(t.at(1, 0), 5);
    EXPECT_EQ(t.at(0, 1), causal ? 0 : 1);
    EXPECT_EQ(t.at(0, 0), 0);
    EXPECT_EQ(t.most_received(), 5);
    EXPECT_EQ(t.most_sent(), 5);
    EXPECT_FALSE(t.falls_back(cfg.c));
  }
}

TEST(GroupCast, EqualsTheKeysSomeQuerySeesForEveryConsecutiveLayout) {
  int checked = 0;
  for (const char* spec :
       {static_cast<const char*>(nullptr), "uniform:1:40", "lognormal:24:1", "pareto:8:1.2"})
    for (Layout l : {Layout::contiguous, Layout::zigzag, Layout::doc_zigzag, Layout::balanced})
      for (Variant v : {Variant::ring, Variant::groupcast})  // balanced: both plans
        for (int n_c : {2, 3, 4, 8})
          for (bool causal : {true, false}) {
            if ((is_document_layout(l) && !spec) ||
                (v == Variant::groupcast && l != Layout::balanced))
              continue;
            const RingConfig cfg = test_config(l, n_c, 48, causal, spec, 5 + n_c, v);
            const GroupCastTraffic t = group_cast_traffic(cfg);
            for (int r = 0; r < n_c; ++r)
              for (int s = 0; s < n_c; ++s)
                ASSERT_EQ(t.at(r, s), r == s ? 0 : brute_seen(cfg, r, s))
                    << layout_name(l) << " " << (spec ? spec : "one document") << " n_c " << n_c
                    << (causal ? " causal" : " full") << " receiver " << r << " source " << s;
            ++checked;
          }
  EXPECT_EQ(checked, 2 * 8 + 3 * (3 * 8 + 2 * 8));
}

TEST(GroupCast, StripedHoldsEveryKeyItSeesAndFallsBack) {
  // Strided runs leave no window to cut: every rank's keys up to its last query travel, a bound
  // on what its queries see, and the busiest rank receives every other block.
  for (bool causal : {true, false}) {
    const RingConfig cfg = test_config(Layout::striped, 4, 48, causal, "lognormal:24:1", 9);
    const GroupCastTraffic t = group_cast_traffic(cfg);
    for (int r = 0; r < 4; ++r)
      for (int s = 0; s < 4; ++s)
        if (r != s) EXPECT_GE(t.at(r, s), brute_seen(cfg, r, s));
    EXPECT_TRUE(t.falls_back(cfg.c));
  }
}

TEST(GroupCast, OneDocumentFallsBackToTheRing) {
  // Causal over one document: the last rank's queries see every earlier key, so it receives
  // (and rank 0 sends) what the ring moves.
  for (Layout l : {Layout::contiguous, Layout::zigzag}) {
    const RingConfig cfg = test_config(l, 4, 16, true, nullptr, 1);
    EXPECT_TRUE(group_cast_traffic(cfg).falls_back(cfg.c)) << layout_name(l);
  }
  EXPECT_TRUE(group_cast_falls_back(3 * 16, 4, 16));
  EXPECT_FALSE(group_cast_falls_back(3 * 16 - 1, 4, 16));
  EXPECT_FALSE(group_cast_falls_back(0, 1, 16));
}

TEST(GroupCast, BatchesFillOneBlockInOrder) {
  EXPECT_EQ(group_cast_batches({3, 5, 2, 7}, 8), (std::vector<int>{0, 0, 1, 2}));
  EXPECT_EQ(group_cast_batches({8, 1}, 8), (std::vector<int>{0, 1}));
  EXPECT_TRUE(group_cast_batches({}, 8).empty());
}

TEST(GroupCast, BalancedCutsOnlyWhatItMustOverAlignedNeighbours) {
  for (const char* spec : {"lognormal:64:1", "pareto:16:1.1"})
    for (int n_c : {4, 8, 16}) {
      const RingConfig cfg =
          test_config(Layout::balanced, n_c, 1024, true, spec, 7, Variant::groupcast);
      const PackedDocuments& d = *cfg.docs;
      std::vector<std::set<int>> ranks_of(static_cast<std::size_t>(d.count()));
      int for_room = 0;           // documents cut only because no rank had room for all of it
      int must = 0, aligned = 0;  // the others, and those on an aligned group
      for (int r = 0; r < n_c; ++r)
        for (const Segment& s : token_segments(cfg, r))
          ranks_of[static_cast<std::size_t>(d.document_of(s.start))].insert(r);
      // What a rank has left for whole documents: their work over n_c.
      double whole = 0;
      auto work_of = [&](std::int64_t doc) {
        return static_cast<double>(query_work(d, doc, d.start(doc), d.end(doc), true));
      };
      for (std::int64_t doc = 0; doc < d.count(); ++doc)
        whole += ranks_of[static_cast<std::size_t>(doc)].size() == 1 ? work_of(doc) : 0.0;
      const double share = whole / n_c;
      for (std::int64_t doc = 0; doc < d.count(); ++doc) {
        const std::set<int>& on = ranks_of[static_cast<std::size_t>(doc)];
        const double work = work_of(doc);
        const auto g = static_cast<int>(on.size());
        if (g == 1) continue;
        // Cut where it must be (too long for a rank, or heavier than what a rank has left for
        // whole documents), or where no rank had room left for all of it.
        if (d.length(doc) <= cfg.c && work <= share) {
          ++for_room;
          continue;
        }
        // A group of g neighbours starting at a multiple of g (inside one node of g or more
        // ranks), unless the groups had no room left for it and it went in pieces.
        ++must;
        aligned += *on.rbegin() - *on.begin() == g - 1 && *on.begin() % g == 0;
      }
      EXPECT_GE(4 * aligned, 3 * must) << spec << " n_c " << n_c;
      // Each rank's last room splits at most one document it did not have to.
      EXPECT_LE(for_room, n_c) << spec << " n_c " << n_c;
      // Fewer bytes than the ring's plan of the same pack, which cuts every document it can.
      const RingConfig ring_plan = test_config(Layout::balanced, n_c, 1024, true, spec, 7);
      EXPECT_LT(group_cast_traffic(cfg).most_received(),
                group_cast_traffic(ring_plan).most_received())
          << spec << " n_c " << n_c;
      EXPECT_LT(ring_work(cfg).max_over_mean(), 1.35) << spec << " n_c " << n_c;
    }
}

}  // namespace
}  // namespace suite::ring

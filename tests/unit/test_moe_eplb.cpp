// EPLB placement (bench/moe/moe_eplb.hpp) against its rules and a brute-force optimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "bench/moe/moe_eplb.hpp"

namespace suite::moe {
namespace {

// The least possible busiest-rank load over every packing of the replicas (loads split evenly
// over an expert's replicas) into ranks of `slots` slots, no rank holding one expert twice.
double brute_force_best(const std::vector<double>& load, const std::vector<int>& count, int ranks,
                        int slots) {
  std::vector<std::pair<double, int>> items;
  for (std::size_t e = 0; e < load.size(); ++e)
    for (int c = 0; c < count[e]; ++c)
      items.push_back({load[e] / count[e], static_cast<int>(e)});
  std::vector<double> packed(static_cast<std::size_t>(ranks), 0.0);
  std::vector<std::set<int>> held(static_cast<std::size_t>(ranks));
  double best = 1e300;
  std::function<void(std::size_t)> go = [&](std::size_t i) {
    if (i == items.size()) {
      best = std::min(best, *std::max_element(packed.begin(), packed.end()));
      return;
    }
    for (int r = 0; r < ranks; ++r) {
      auto& h = held[static_cast<std::size_t>(r)];
      if (static_cast<int>(h.size()) >= slots || h.count(items[i].second)) continue;
      packed[static_cast<std::size_t>(r)] += items[i].first;
      h.insert(items[i].second);
      go(i + 1);
      h.erase(items[i].second);
      packed[static_cast<std::size_t>(r)] -= items[i].first;
    }
  };
  go(0);
  return best;
}

TEST(Eplb, FollowsItsRulesAndComesCloseToTheOptimum) {
  std::mt19937 rng(7);
  int tried = 0;
  for (int ranks : {2, 3, 4})
    for (int E : {4, 6, 8})
      for (int R = 1; R <= E; ++R)
        for (int trial = 0; trial < 5; ++trial) {
          if ((E + R) % ranks != 0 || E + R > 10) continue;
          std::vector<double> load(static_cast<std::size_t>(E));
          std::exponential_distribution<double> skewed(1.0);
          for (auto& l : load)
            l = std::floor(100 * skewed(rng)) + 1;
          const ExpertPlacement p = eplb_placement(load, R, ranks);
          ASSERT_EQ(p.slots(), E + R);
          std::vector<int> order(static_cast<std::size_t>(E)), count(static_cast<std::size_t>(E));
          for (int e = 0; e < E; ++e)
            order[static_cast<std::size_t>(e)] = e;
          std::stable_sort(order.begin(), order.end(),
                           [&](int a, int b) { return load[a] > load[b]; });
          for (int i = 0; i < E; ++i) {
            const int e = order[static_cast<std::size_t>(i)];
            const auto& reps = p.replicas[static_cast<std::size_t>(e)];
            EXPECT_EQ(static_cast<int>(reps.size()), i < R ? 2 : 1) << "expert " << e;
            count[static_cast<std::size_t>(e)] = static_cast<int>(reps.size());
            std::set<int> owners;
            for (int s : reps) {
              EXPECT_EQ(p.slot_expert[static_cast<std::size_t>(s)], e);
              owners.insert(p.owner(s));
            }
            EXPECT_EQ(owners.size(), reps.size()) << "two replicas of " << e << " on one rank";
          }
          const auto per_rank = rank_loads(p, load);
          const double got = *std::max_element(per_rank.begin(), per_rank.end());
          const double best = brute_force_best(load, count, ranks, (E + R) / ranks);
          const double biggest = *std::max_element(load.begin(), load.end());
          // Greedy packing: within one (split) item of the optimum.
          EXPECT_LE(got, best + biggest / 2 + 1e-9)
              << "ranks " << ranks << " E " << E << " R " << R << ": " << got << " vs " << best;
          ++tried;
        }
  EXPECT_EQ(tried, 50);
}

TEST(Eplb, SplitRuleAndRefusals) {
  const ExpertPlacement p = eplb_placement({10, 1, 1, 1}, 2, 2);
  const auto& hot = p.replicas[0];
  ASSERT_EQ(hot.size(), 2u);
  std::map<int, int> got;
  for (int n = 0; n < 9; ++n)
    ++got[replica_for_copy(p, 0, n)];
  EXPECT_EQ(got[hot[0]], 5);
  EXPECT_EQ(got[hot[1]], 4);
  EXPECT_THROW(eplb_placement({1, 1, 1, 1}, 1, 2), std::invalid_argument);  // 5 slots on 2
  EXPECT_THROW(eplb_placement({1, 1}, 3, 1), std::invalid_argument);
  const ExpertPlacement b = block_placement(8, 4);
  EXPECT_EQ(b.owner(5), 2);
  EXPECT_EQ(b.redundant(), 0);
}

}  // namespace
}  // namespace suite::moe

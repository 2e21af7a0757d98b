#include "bench/moe/moe_eplb.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace suite::moe {

ExpertPlacement block_placement(int experts, int ranks) {
  ExpertPlacement p;
  p.experts = experts;
  p.ranks = ranks;
  p.slots_per_rank = experts / ranks;
  p.slot_expert.resize(static_cast<std::size_t>(experts));
  std::iota(p.slot_expert.begin(), p.slot_expert.end(), 0);
  p.replicas.resize(static_cast<std::size_t>(experts));
  for (int e = 0; e < experts; ++e)
    p.replicas[static_cast<std::size_t>(e)] = {e};
  return p;
}

ExpertPlacement eplb_placement(const std::vector<double>& load, int redundant, int ranks) {
  const int E = static_cast<int>(load.size());
  if (redundant < 0 || redundant > E || ranks < 1 || (E + redundant) % ranks != 0 ||
      (redundant > 0 && ranks < 2))
    throw std::invalid_argument(
        "eplb_placement: needs 0 <= R <= E, (E + R) % ranks == 0 and "
        "two ranks or more for replicas");
  if (redundant == 0) return block_placement(E, ranks);
  std::vector<int> by_load(static_cast<std::size_t>(E));
  std::iota(by_load.begin(), by_load.end(), 0);
  std::stable_sort(by_load.begin(), by_load.end(), [&](int a, int b) {
    return load[static_cast<std::size_t>(a)] > load[static_cast<std::size_t>(b)];
  });
  std::vector<int> count(static_cast<std::size_t>(E), 1);
  for (int i = 0; i < redundant; ++i)
    count[static_cast<std::size_t>(by_load[static_cast<std::size_t>(i)])] = 2;
  struct Item {
    double load;
    int expert;
  };
  std::vector<Item> items;
  for (int e = 0; e < E; ++e)
    for (int c = 0; c < count[static_cast<std::size_t>(e)]; ++c)
      items.push_back({load[static_cast<std::size_t>(e)] / count[static_cast<std::size_t>(e)], e});
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.load > b.load; });
  ExpertPlacement p;
  p.experts = E;
  p.ranks = ranks;
  p.slots_per_rank = (E + redundant) / ranks;
  std::vector<std::vector<int>> on(static_cast<std::size_t>(ranks));
  std::vector<double> packed(static_cast<std::size_t>(ranks), 0.0);
  for (const Item& it : items) {
    int best = -1;
    for (int r = 0; r < ranks; ++r) {
      const auto& held = on[static_cast<std::size_t>(r)];
      if (static_cast<int>(held.size()) >= p.slots_per_rank ||
          std::find(held.begin(), held.end(), it.expert) != held.end())
        continue;
      if (best < 0 || packed[static_cast<std::size_t>(r)] < packed[static_cast<std::size_t>(best)])
        best = r;
    }
    if (best < 0)
      throw std::logic_error("eplb_placement: no rank has a free slot for expert " +
                             std::to_string(it.expert));
    on[static_cast<std::size_t>(best)].push_back(it.expert);
    packed[static_cast<std::size_t>(best)] += it.load;
  }
  p.replicas.resize(static_cast<std::size_t>(E));
  for (int r = 0; r < ranks; ++r)
    for (int j = 0; j < p.slots_per_rank; ++j) {
      const int e = on[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)];
      p.slot_expert.push_back(e);
      p.replicas[static_cast<std::size_t>(e)].push_back(r * p.slots_per_rank + j);
    }
  return p;
}

std::vector<double> rank_loads(const ExpertPlacement& p, const std::vector<double>& load) {
  std::vector<double> out(static_cast<std::size_t>(p.ranks), 0.0);
  for (int s = 0; s < p.slots(); ++s) {
    const int e = p.slot_expert[static_cast<std::size_t>(s)];
    out[static_cast<std::size_t>(p.owner(s))] +=
        load[static_cast<std::size_t>(e)] /
        static_cast<double>(p.replicas[static_cast<std::size_t>(e)].size());
  }
  return out;
}

double rank_load_max_over_mean(const ExpertPlacement& p, const std::vector<double>& load) {
  const auto loads = rank_loads(p, load);
  double sum = 0, most = 0;
  for (double l : loads) {
    sum += l;
    most = std::max(most, l);
  }
  return sum > 0 ? most * static_cast<double>(loads.size()) / sum : 0;
}

}  // namespace suite::moe

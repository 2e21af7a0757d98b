// MoeLayer's accounting by level of the network (moe_layer.hpp): the rows its routing sends
// inside and across nodes under flat dispatch, the distinct (token, node) pairs hierarchical
// dispatch sends instead, and the check of hierarchical dispatch's counted bytes per level
// against what the routing implies.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/moe/moe_layer.hpp"

namespace suite::moe {

std::int64_t MoeLayer::flat_intra_rows() const {
  const int per_rank = slots_, P = cfg_.ranks_per_node;
  std::int64_t n = 0;
  for (int r = (rank_ / P) * P; r < (rank_ / P + 1) * P; ++r)
    for (int j = 0; r != rank_ && j < per_rank; ++j)
      n += plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)];
  return n;
}

std::int64_t MoeLayer::flat_inter_rows() const {
  std::int64_t own = 0;
  for (auto n : plan_.send_counts)
    own += n;
  const int per_rank = slots_, P = cfg_.ranks_per_node;
  for (int r = (rank_ / P) * P; r < (rank_ / P + 1) * P; ++r)
    for (int j = 0; j < per_rank; ++j)
      own -= plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)];
  return own;
}

// From the routing table itself (chosen experts and kept flags), not from any plan.
std::int64_t MoeLayer::distinct_inter_rows() const {
  const int per_node = slots_ * cfg_.ranks_per_node;
  const int me = rank_ / cfg_.ranks_per_node;
  std::int64_t n = 0;
  std::vector<int> nodes;
  for (std::int64_t t = 0; t < cfg_.tokens; ++t) {
    nodes.clear();
    for (int j = 0; j < cfg_.k; ++j) {
      const auto c = static_cast<std::size_t>(t * cfg_.k + j);
      if (!keep_[c]) continue;
      const int node = phys_chosen_[c] / per_node;
      if (node != me && std::find(nodes.begin(), nodes.end(), node) == nodes.end())
        nodes.push_back(node);
    }
    n += static_cast<std::int64_t>(nodes.size());
  }
  return n;
}

int MoeLayer::most_nodes_per_token() const {
  const int per_node = slots_ * cfg_.ranks_per_node;
  int most = 0;
  std::vector<int> nodes;
  for (std::int64_t t = 0; t < cfg_.tokens; ++t) {
    nodes.clear();
    for (int j = 0; j < cfg_.k; ++j)
      nodes.push_back(phys_chosen_[static_cast<std::size_t>(t * cfg_.k + j)] / per_node);
    std::sort(nodes.begin(), nodes.end());
    most =
        std::max(most, static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin()));
  }
  return most;
}

std::string MoeLayer::level_mismatch() const {
  if (!hier_) return "";
  const std::int64_t row = cfg_.h * static_cast<std::int64_t>(e_);
  const std::int64_t out = hier_->inter_rows_sent() * row, in = hier_->intra_rows_received() * row,
                     fan = hier_->intra_rows_sent() * row,
                     back = hier_->inter_rows_returned() * row;
  std::string why;
  auto expect = [&](const char* what, std::int64_t got, std::int64_t want) {
    if (got != want)
      why += std::string(what) + " " + std::to_string(got) + " bytes, the routing implies " +
             std::to_string(want) + "; ";
  };
  expect("distinct (token, other node) rows", hier_->inter_rows_sent(), distinct_inter_rows());
  // The dispatch sends rows out over the rail and fans them out; the combine retraces it.
  expect("dispatch inter-node sent", levels_[0].inter_sent, out);
  expect("dispatch inter-node received", levels_[0].inter_recv, back);
  expect("dispatch intra-node sent", levels_[0].intra_sent, fan);
  expect("dispatch intra-node received", levels_[0].intra_recv, in);
  expect("combine intra-node sent", levels_[1].intra_sent, in);
  expect("combine intra-node received", levels_[1].intra_recv, fan);
  expect("combine inter-node sent", levels_[1].inter_sent, back);
  expect("combine inter-node received", levels_[1].inter_recv, out);
  if (!cfg_.backward()) return why;
  expect("bwd_combine inter-node sent", levels_[2].inter_sent,
         out + hier_->inter_records_answered() * 4);
  expect("bwd_combine inter-node received", levels_[2].inter_recv,
         back + hier_->inter_records_sent() * 4);
  expect("bwd_combine intra-node sent", levels_[2].intra_sent, fan);
  expect("bwd_combine intra-node received", levels_[2].intra_recv, in);
  expect("bwd_dispatch intra-node sent", levels_[3].intra_sent, in);
  expect("bwd_dispatch inter-node sent", levels_[3].inter_sent, back);
  expect("bwd_dispatch inter-node received", levels_[3].inter_recv, out);
  return why;
}

}  // namespace suite::moe

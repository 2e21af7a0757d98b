#include "bench/moe/moe_levels_report.hpp"

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/formulas/model.hpp"
#include "common/harness/errors.hpp"

namespace suite::moe {

void report_levels(const MoeConfig& c, const LevelFacts& f, CaseRecord& rec) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<std::int64_t> mine;
  for (const LevelBytes& l : f.levels)
    mine.insert(mine.end(), {l.inter_sent, l.inter_recv, l.intra_sent, l.intra_recv});
  mine.insert(mine.end(), {f.flat_intra_rows, f.flat_inter_rows, f.distinct_inter_rows,
                           f.most_nodes_per_token});
  const auto width = mine.size();
  std::vector<std::int64_t> all(rank == 0 ? width * static_cast<std::size_t>(ranks) : 0);
  SUITE_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(width), MPI_INT64_T, all.data(),
                             static_cast<int>(width), MPI_INT64_T, 0, MPI_COMM_WORLD));
  if (rank != 0) return;

  const bool hier = c.dispatch == Dispatch::hierarchical;
  const double row = static_cast<double>(c.h) * static_cast<double>(dtype_size(c.dtype));
  const double tokens = static_cast<double>(c.tokens) * ranks;
  double flat_intra = 0, flat_inter = 0, distinct = 0, inter = 0, intra = 0;
  std::int64_t most_nodes = 0;
  IntTable table{"level_bytes", static_cast<std::size_t>(ranks), 16, {}};
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t* v = all.data() + static_cast<std::size_t>(r) * width;
    table.values.insert(table.values.end(), v, v + 16);
    inter += static_cast<double>(v[0]);  // forward dispatch, sent across nodes
    intra += static_cast<double>(v[2]);  // and inside the node
    flat_intra += static_cast<double>(v[16]);
    flat_inter += static_cast<double>(v[17]);
    distinct += static_cast<double>(v[18]);
    most_nodes = std::max(most_nodes, v[19]);
  }
  auto& a = rec.attrs;
  a.emplace_back("dispatch", std::string(dispatch_name(c.dispatch)));
  a.emplace_back("ranks_per_node", std::int64_t{c.ranks_per_node});
  a.emplace_back("nodes", std::int64_t{c.nodes()});
  // Node-limited routing: its limit (0: none) and the most nodes a token used, from the routing.
  a.emplace_back("max_nodes_per_token", std::int64_t{c.max_nodes_per_token});
  a.emplace_back("most_nodes_per_token", most_nodes);
  // Per token of the job: what flat dispatch sends across nodes and inside them (one row per
  // kept copy), what hierarchical sends across (one per distinct other node), and the
  // uniform-routing predictions.
  a.emplace_back("flat_inter_node_rows_per_token", flat_inter / tokens);
  a.emplace_back("flat_intra_node_rows_per_token", flat_intra / tokens);
  a.emplace_back("hier_inter_node_rows_per_token", distinct / tokens);
  a.emplace_back("pred_flat_inter_node_rows_per_token",
                 model::moe_inter_rows_per_token_flat(c.k, c.experts, c.nodes()));
  a.emplace_back("pred_hier_inter_node_rows_per_token",
                 model::moe_inter_rows_per_token_hier(c.k, c.experts, c.nodes()));
  a.emplace_back("inter_node_saving", distinct > 0 ? flat_inter / distinct : 0.0);
  // Forward dispatch bytes per rank, by level: measured by the transport under hierarchical,
  // implied by the routing under flat (one exchange, so the transport cannot split it).
  a.emplace_back("dispatch_inter_node_bytes_per_rank", (hier ? inter : flat_inter * row) / ranks);
  a.emplace_back("dispatch_intra_node_bytes_per_rank", (hier ? intra : flat_intra * row) / ranks);
  a.emplace_back("flat_dispatch_inter_node_bytes_per_rank", flat_inter * row / ranks);
  if (hier) rec.int_tables.push_back(std::move(table));
}

}  // namespace suite::moe

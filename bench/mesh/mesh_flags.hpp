// The mesh benchmark's flags and the cases they sweep (every combination of the lists whose
// degrees multiply to the job's ranks).
#pragma once

#include <string>
#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "common/context.hpp"

namespace suite::mesh {

struct MeshFlags {
  std::string tp = "1", cp = "1", dp = "0", ep = "0";
  std::string order = "tp,cp,ep,dp";
  int ranks_per_node = 0;
  std::int64_t seq = 256, batch = 1, hidden = 256, heads = 4, kv_heads = 0, ffn_hidden = 0;
  int causal = 1;
  std::string cp_method = "ring", layout = "zigzag";
  int experts = 0, top_k = 2;
  std::string mlp = "gelu", dispatch = "flat";
  std::string tp_overlap = "none";
  std::string pass = "fwd";
  std::string attn_kernel = "auto";
};

void add_mesh_flags(CLI::App& app, MeshFlags& f);

// Every case the flags name, validated (UsageError naming the flag otherwise).
std::vector<MeshConfig> mesh_configs(const MeshFlags& f, const BenchContext& ctx);

}  // namespace suite::mesh

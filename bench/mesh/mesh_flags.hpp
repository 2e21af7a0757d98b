// The mesh benchmark's flags and the cases they sweep (every combination of the lists whose
// degrees multiply to the job's ranks). The parts' own flags are theirs, declared by their
// folders: the layer's shape and --tp-overlap (sp_tp), the ring's --layout, --causal and
// --kv-heads (ring_attention), the MoE's --experts, --top-k, --mlp, --dispatch and
// --ranks-per-node (moe); the mesh adds its degrees, order and CP method.
#pragma once

#include <string>
#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "bench/moe/moe_layer_flags.hpp"
#include "bench/sp_tp/layer_flags.hpp"
#include "common/harness/context.hpp"

namespace suite::mesh {

struct MeshFlags {
  std::string tp = "1", cp = "1", dp = "0", ep = "0";
  // P (list), declared with the pipeline's schedule flags (the mesh executable's).
  std::string pp = "1";
  std::string order = "tp,cp,ep,dp";
  sp_tp::LayerShapeFlags shape{256, 1, 256, 4, 0};
  std::string causal = "1";
  int kv_heads = 0;
  std::string cp_method = "ring", layout = "zigzag";
  moe::MoeLayerFlags moe{"0", 2, "gelu", "flat", 0};
  std::string tp_overlap = "none";
  std::string grad_bucket = "0";
  std::string moe_overlap = "none";
  std::string pass = "fwd";
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
};

void add_mesh_flags(CLI::App& app, MeshFlags& f);
// --tp and --cp, the block's degrees (lists), for mesh and for the pipeline's block stages.
void add_tp_cp_flags(CLI::App& app, std::string& tp, std::string& cp);
// A degree list ("1,2" or a range); 0 is allowed where the flag gives it a meaning.
std::vector<int> degrees(const std::string& flag, const std::string& text);

// Every case the flags name, validated (UsageError naming the flag otherwise).
std::vector<MeshConfig> mesh_configs(const MeshFlags& f, const BenchContext& ctx);

}  // namespace suite::mesh

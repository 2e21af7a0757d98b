// One case of the composed block (METHODS.md section 6): a pre-LN transformer block (sp_tp's
// layer, TP+SP) over a TP x CP x DP mesh, its attention over the CP group (ring, all-gather,
// Ulysses or a hybrid) and, with experts, its MLP an MoE layer over an EP group; the sizes every
// part derives from it.
#pragma once

#include <cstdint>
#include <string>

#include "bench/layouts/ring_layout.hpp"
#include "bench/moe/moe_config.hpp"
#include "bench/sp_tp/layer_config.hpp"
#include "common/formulas/cp_method.hpp"
#include "common/harness/pass_list.hpp"
#include "common/mesh/mesh_layout.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::mesh {

struct MeshConfig {
  MeshShape shape;
  int ranks_per_node = 0;  // recorded; the MoE's hierarchical dispatch groups by it
  // The block: s tokens per sequence, b sequences per DP rank (the global batch is D b).
  std::int64_t s = 1024, b = 1, h = 512, heads = 8, kv_heads = 0, d_ff = 0;  // d_ff 0: 4h
  bool causal = true;
  CpChoice cp_method;
  ring::Layout layout = ring::Layout::zigzag;  // of the ring (or the hybrid's ring part)
  sp_tp::TpOverlapMode tp_overlap;
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
  // With experts > 0 the MLP is an MoE layer of that many experts (moe's) of width d_ff: top-k,
  // MLP kind, dispatch; dropless, no auxiliary loss.
  int experts = 0, top_k = 2;
  moe::Mlp mlp = moe::Mlp::gelu;
  moe::Dispatch dispatch = moe::Dispatch::flat;
  double grad_bucket_mb = 0;  // 0: the gradient sums after the backward
  // --moe-overlap two-batch: two micro-batches of b/2 sequences (block_overlap.hpp).
  bool two_batch = false;
  DType dtype = DType::fp32;
  std::uint64_t seed = 1234;
  Pass pass = Pass::fwd;

  bool backward() const { return pass == Pass::fwd_bwd; }
  bool moe() const { return experts > 0; }
  std::int64_t ffn() const { return d_ff > 0 ? d_ff : 4 * h; }
  std::int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t head_dim() const { return h / heads; }
  std::int64_t c() const { return s / shape.cp; }             // tokens per CP rank
  std::int64_t rows() const { return c() * b; }               // the TP group's rows
  std::int64_t sp_rows() const { return rows() / shape.tp; }  // this rank's token-wise rows
  std::int64_t global_batch() const { return b * shape.dp; }
  // The sp_tp layer this rank runs: s = c, TP+SP over T, no dropout (its masks are keyed by
  // consecutive rows; the mesh's rows are the global batch's), dense MLP unless MoE.
  sp_tp::LayerConfig layer() const;
  // The MoE layer of this rank's EP group: T = c b / T tokens per rank.
  moe::MoeConfig moe_layer() const;
  std::string case_name() const;
};

// Throws UsageError naming the flag and the numbers (shape.ep must be resolved: E, not 0): degrees,
// heads per T (and T u for Ulysses), K/V heads, s per C (2 C for zig-zag), experts per E, the
// gradient bucket, --moe-overlap's needs (experts, b even, C = 1); with P > 1 stages, what the
// pipeline's block stage runs (no experts, the causal zig-zag ring, fp64, ...).
void validate(const MeshConfig& c, int world);

}  // namespace suite::mesh

// The composed block's step time on a two-tier cluster (METHODS.md section 6): each axis's
// collectives on the link its group spans (inside a node, or across nodes when the order puts
// its ranks on several), its time and the part nothing hides, beside the compute at F. What a
// mesh order buys is read off this: the same degrees in another order move an axis from the
// node's links to the network.
#pragma once

#include "common/formulas/model.hpp"
#include "common/formulas/plan_compute.hpp"
#include "common/mesh/mesh_layout.hpp"

namespace suite::model {

struct LinkLevel {
  double bw = 0;   // bytes/s per rank and direction
  double lat = 0;  // s per message
};

// One level's rates by what moves (calibrate.py measures each): the ring steps of a
// reduce-scatter or all-gather (TP), an all-reduce (the gradient sums), an all-to-all (EP,
// Ulysses) and point-to-point (the CP ring's exchange).
struct LevelRates {
  LinkLevel rs_ag, all_reduce, a2a, p2p;
};
inline LevelRates same_rates(LinkLevel l) {
  return {l, l, l, l};
}

struct Cluster {
  int ranks_per_node = 8;
  LevelRates intra, inter;
  double flops = 0;                   // F of the GEMMs
  double attn_flops = 0;              // F of attention (0: flops)
  double attn_flops_bwd = 0;          // F_b, attention's backward (0: attn_flops)
  std::vector<GemmPoint> gemm_table;  // GEMM rates by size (empty: every GEMM at flops)
  double hbm_bw = 0;  // bytes/s through HBM for the non-matrix work (0: not charged)
};

struct AxisTime {
  double bytes = 0;     // sent per rank per step (mesh_*_bytes)
  double time = 0;      // its collectives' time in the step
  double exposed = 0;   // the part of it nothing hides
  bool across = false;  // its group spans nodes: the network's rate and latency
};

struct MeshStep {
  AxisTime tp, cp, ep, dp;
  double compute = 0;  // GEMMs (by size), attention at F (F_b backward), the non-matrix work
  double step = 0;     // compute + every axis's exposed time
};

// Collectives as rings (NCCL's algorithm): an all-gather or reduce-scatter of N bytes over n
// ranks takes (n-1) (lat + N/(n bw)), an all-reduce twice that, an all-to-all sending B bytes
// per rank (n-1) lat + B / bw (Ulysses': its peers' shares on the network and on the node's
// links at once, where its group spans nodes). TP's and EP's are exposed (blocking), the gradient
// sums after the backward; the ring's K/V transfer hides behind each round's attention unless
// longer (the causal layouts balanced: each round 1/C of the attention).
MeshStep mesh_step(const MeshBlock& m, const MeshLayout& layout, const Cluster& cluster,
                   bool backward, bool causal);

// FLOPs per rank of the block's forward: its GEMMs (QKV, output projection, MLP or the routed
// experts and the router) over the TP group's c b rows for its 1/T columns, and attention over
// the rank's share of the visible pairs (causal: half).
double mesh_gemm_flops(const MeshBlock& m);
double mesh_attention_flops(const MeshBlock& m, bool causal);

}  // namespace suite::model

// The terms of a real training run the planner charges beside the block (METHODS.md 6) and the
// schedule (plan_pipeline.hpp): activation recomputation, how data parallelism shards the
// weights, gradients and optimizer state, and the embedding and output layer on the first and
// last stage. Each is a formula of one layer or one parameter, so it can be checked by hand.
#pragma once

#include <string>

#include "common/formulas/dp_shard.hpp"
#include "common/formulas/mesh_model.hpp"
#include "common/formulas/pipeline_graph.hpp"

namespace suite::model {

// none: the forward keeps every activation the backward reads (mesh_ledger_bytes). selective:
// the LayerNorm outputs and the MLP's activation-function output are recomputed in the backward
// (elementwise work, memory-bound: no FLOPs charged). full: only each layer's input is kept,
// and the backward runs the layer's forward again first.
enum class Recompute { none, selective, full };
Recompute parse_recompute(const std::string& name);  // UsageError naming --recompute
const char* recompute_name(Recompute r);

// Peak bytes a rank holds per parameter during the step under each DP sharding mode
// (dp_shard.hpp): e for the weight, 4 for its fp32 gradient, 12 for Adam's fp32 master weight
// and two moments, each divided by `ranks` where the mode shards it at the step's peak (full's
// gathered layer is charged apart).
double state_bytes_per_param(double e, DpShard shard, double ranks);

// Activation bytes one layer keeps per micro-batch for the backward (the dense block's part;
// the MoE's saved rows come on top), with n = c b / T rows a rank under SP:
// none: mesh_ledger_bytes; selective: that less the first LayerNorm's output (n h e) and, with a
// dense MLP, the second's (n h e) and the activation function's output (c b d_ff / T e; with
// experts the second LayerNorm's output is the MoE's input copy, charged apart); full: the
// layer's input, n h e.
double held_layer_bytes(const MeshBlock& m, Recompute r);

// Full sharding's weight all-gathers: before each layer's forward and again before its backward,
// per micro-batch, the dense weights (e bytes each) over the C D ranks as a ring on `level`:
// 2 (n - 1)(lat + W / (n bw)) with W the rank's whole layer's bytes. Exposed (not prefetched).
double full_shard_gather_s(const MeshBlock& m, const LinkLevel& level);

// The output layer on the last stage, per micro-batch: its GEMM of the rank's c b rows by h by
// V / T columns, 2 c b h V / T FLOPs forward, the same for the input gradient and for the
// weight gradient, at F. The embedding's lookup on the first stage costs no FLOPs.
pipeline::OpCosts output_layer_costs(const MeshBlock& m, double vocab, double flops);

// Parameters of the embedding or of the output layer on a rank: h V / T (vocab-parallel).
double vocab_params(const MeshBlock& m, double vocab);

// The output layer's fp32 logits of one micro-batch (the loss's input): c b V / T x 4 bytes.
double logits_bytes(const MeshBlock& m, double vocab);

}  // namespace suite::model

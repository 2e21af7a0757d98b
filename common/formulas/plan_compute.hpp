// The block's compute beyond FLOPs at one rate (docs/PUBLISHED_RUNS.md, "The compute terms"):
// each GEMM at the rate a GEMM of its size reaches (a cluster spec's published cuBLAS points),
// the work that is not a matrix product (LayerNorm, activations, dropout, residual adds, and
// unfused attention's softmax over the scores) as bytes through HBM, and the optimizer step.
// Each term is zero where the cluster gives no figure, so the rates of the flags time the block
// as before.
#pragma once

#include <vector>

#include "common/formulas/model.hpp"

namespace suite::model {

// A GEMM of `flops` FLOPs (2 M N K) ran at `rate` FLOP/s (a published cuBLAS measurement).
struct GemmPoint {
  double flops = 0, rate = 0;
};

// The rate of a GEMM of f FLOPs: linear in log f between the table's points (sorted by flops),
// the nearest end's rate outside them; `fallback` with no table.
double gemm_rate(const std::vector<GemmPoint>& table, double flops, double fallback);

// The forward's GEMMs of one layer on a rank, 2 M N K each, with M the TP group's c b rows: QKV
// (N = (a + 2 n_kv) d / T, K = h), the projection (N = h, K = h / T), fc1 and fc2 (d_ff / T and
// h) or, with experts, each local expert's (k N E / experts rows; SwiGLU's gate a third) and the
// router (N rows, E columns). Their sum is mesh_gemm_flops.
std::vector<double> mesh_gemm_list(const MeshBlock& m);

// Seconds of the forward's GEMMs: each at gemm_rate of its size. With no table: the FLOPs at
// `flops` (each weight's two backward GEMMs have the forward's size, so 2x this).
double mesh_gemm_seconds(const MeshBlock& m, const std::vector<GemmPoint>& table, double flops);

// Unfused attention (scores through HBM, Megatron-LM before FlashAttention): its two batched
// GEMMs over the whole c x s score matrix (causal or not: the mask is applied after),
// 4 c s b h / T FLOPs forward.
double unfused_attention_flops(const MeshBlock& m);

// Bytes one layer's non-matrix work moves through HBM on a rank, forward and backward, with
// n = c b / T rows under SP and S = c b s a / T scores:
// forward: 2 LayerNorms 2 n h e each; 2 bias-dropout-residual adds n h (3e + 1) each (two reads,
// a write, a 1-byte mask); the activation, read and written over the hidden rows (dense
// c b d_ff / T, experts k n d_ff; SwiGLU reads its two halves: 3 in place of 2); unfused
// attention's softmax (2 S e) and its dropout (S (2e + 1)).
// backward: each LayerNorm 3 n h e (dy, x, dx); each dropout n h (2e + 1) (dy, mask, dx); the
// activation 3 (SwiGLU 5) hidden rows e; the softmax 3 S e and its dropout S (2e + 1).
struct ElementwiseBytes {
  double forward = 0, backward = 0;
};
ElementwiseBytes mesh_elementwise_bytes(const MeshBlock& m, bool unfused_attention);

// Adam's step once per optimizer step over a rank's `params`, memory-bound: the fp32 gradient
// read (4), master weight, first and second moments read and written (24), the bf16 weight
// written (2): 30 bytes a parameter, over the `shards` ranks that split the state.
double optimizer_step_bytes(double params, double shards);

}  // namespace suite::model

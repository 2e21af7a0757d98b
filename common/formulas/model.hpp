// Every formula of shared METHODS.md, in one place. Benchmarks write these predictions beside
// their measurements; the `model` executable prints them so a run can be planned first.
// Units: bytes, FLOPs, seconds; e = bytes per element.
#pragma once

#include <cstdint>
#include <vector>

#include "common/formulas/cp_method.hpp"

namespace suite::model {

// ---- collectives (nccl-tests conventions) ----
// Bytes each rank sends in a bandwidth-optimal reduce-scatter / all-gather / all-to-all of
// n bytes over t ranks: (t-1)/t * n; an all-reduce sends twice that.
double rs_or_ag_bytes_per_rank(double n, int t);
double all_reduce_bytes_per_rank(double n, int t);
// busbw = algbw * factor: all-reduce 2(t-1)/t; reduce-scatter, all-gather, all-to-all (t-1)/t.
double busbw_factor_all_reduce(int t);
double busbw_factor_rs_ag_a2a(int t);

// ---- 1.1 TP+SP with its collectives hidden behind the GEMMs (ring decomposition) ----
// Each collective of the TP+SP layer cut into t ring steps of one shard (r = s b / t rows),
// each step beside the GEMM of the shard it has: the GEMM does 2 r h (c h / t) FLOPs while one
// shard of r h e bytes travels, c the GEMM's width over h (QKV 1 + 2 n_kv/a, output projection
// 1, fc1 d_ff/h, or 2 d_ff/h for SwiGLU's gate and up, fc2 d_ff/h). It hides the transfer iff
//   h / t >= e F / (2 c W),
// whatever s. Time of the op: serial t G + (t - 1) C, overlapped G + (t - 1) max(G, C), with
// G the GEMM step (FLOPs / F) and C the transfer step (bytes / W).
struct TpOverlapOp {
  const char* name;        // "qkv", "out_proj", "fc1", "fc2", and their backward ops
  const char* collective;  // "all-gather" or "reduce-scatter"
  double c = 1;            // GEMM width / h
  double flops_per_step = 0, bytes_per_step = 0;
  double threshold = 0;  // the least h / t that hides the transfer: e F / (2 c W)
  double serial_s = 0, overlapped_s = 0;
  double exposed_s() const { return overlapped_s - gemm_s(); }  // what the GEMMs leave showing
  double gemm_s() const;                                        // t G: the op's GEMM alone
  int t = 1;
  double step_gemm_s = 0, step_comm_s = 0;
};
// The forward's four ops (all-gathers before QKV and fc1, reduce-scatters after the output
// projection and fc2), then the backward's: the input gradients' reduce-scatters (QKV, fc1),
// the output gradients' all-gathers (output projection, fc2) and the all-gathers of the
// sequence-sharded inputs for the weight gradients (QKV, fc1), each beside the GEMM that uses
// or makes it, with its forward op's width.
std::vector<TpOverlapOp> tp_overlap_ops(double s, double b, double h, double a, double n_kv,
                                        double d_ff, bool swiglu, int t, double e, double F,
                                        double W);

// ---- 1. Megatron TP vs SP ----
// Per layer and forward pass, bytes each rank sends: TP's 2 all-reduces = SP's 2 RS + 2 AG
// = 4 (t-1)/t * n with n = s*b*h*e.
double tp_layer_comm_bytes_per_rank(double s, double b, double h, int t, double e);
double sp_layer_comm_bytes_per_rank(double s, double b, double h, int t, double e);

struct Activation {
  double s, b, h, a;
  int t = 1;
  double e = 2;    // bytes per activation element; METHODS.md's figures are for bf16 (e = 2)
  double ffn = 4;  // d_ff / h; METHODS.md's figures are for d_ff = 4h
};
// Activation bytes per layer kept for backward (1-byte masks, d_ff = 4h). For e = 2 these are
// METHODS.md's sbh(34 + 5as/h) etc.; for other e each 2-byte tensor scales by e/2: the
// untouched part is (4e+2) sbh (four tensors and two masks), the TP-divided part 12e sbh (Q, K, V,
// projection input: 4e; the two MLP intermediates 2e d_ff/h), the scores path (2e+1) a s^2 b.
double act_bytes_no_parallel(const Activation& x);
double act_bytes_tp(const Activation& x);
double act_bytes_tp_sp(const Activation& x);
// With a fused (flash) attention kernel the 5as/h term is not stored.
double act_bytes_tp_flash(const Activation& x);
double act_bytes_tp_sp_flash(const Activation& x);
// No parallelism with a fused kernel: 34 sbh (bf16).
double act_bytes_no_parallel_flash(const Activation& x);
// Forward FLOPs of one layer per rank under TP degree t: matmuls 2 sbh^2 (4 + 2 d_ff/h) (24
// sbh^2 for d_ff = 4h) plus attention 4 s^2 b h (halved when causal), all divided by t.
double layer_flops_per_rank(const Activation& x, bool causal);

// Backward pass (METHODS.md section 5). Collectives per layer and pass, n = s*b*h*e bytes each.
struct LayerCollectives {
  int all_reduce = 0, reduce_scatter = 0, all_gather = 0;
};
// TP: fwd 2 all-reduces (after the row-parallel matmuls); bwd 2 (the input gradients before the
// column-parallel matmuls): {2,0,0} either way.
LayerCollectives tp_layer_collectives(bool backward);
// TP+SP: fwd 2 RS + 2 AG {0,2,2}; bwd {0,2,4}: g's backward is a reduce-scatter, g_bar's an
// all-gather, and 2 more all-gathers re-gather the LayerNorm output shards for the weight
// gradients of the column-parallel matmuls.
LayerCollectives sp_layer_collectives(bool backward);
// Bytes each rank sends for those collectives over t ranks: (2 AR + RS + AG) (t-1)/t n.
double layer_collectives_bytes_per_rank(const LayerCollectives& c, double n, int t);
// Per layer forward + backward: TP 8 (t-1)/t n (4 all-reduces); SP 10 (t-1)/t n (4 RS + 6 AG).
double tp_layer_comm_bytes_fwd_bwd(double s, double b, double h, int t, double e);
double sp_layer_comm_bytes_fwd_bwd(double s, double b, double h, int t, double e);
// Under SP the 2 LayerNorms' weight and bias gradients (4h elements) are partial sums over the
// rank's tokens: one all-reduce over the TP group per layer, 2 (t-1)/t * 4 h e bytes per rank.
double sp_layernorm_grad_bytes_per_rank(double h, int t, double e);
// Backward FLOPs of one layer per rank: the GEMMs' input and weight gradients, 2x the forward's
// matmul FLOPs, plus attention backward, 2.5x the forward's attention FLOPs (five matmuls per
// visible (query, key) pair instead of two), all divided by t.
double layer_bwd_flops_per_rank(const Activation& x, bool causal);
// The attention part of it alone: 10 s^2 b h / t (halved when causal).
double layer_bwd_attention_flops_per_rank(const Activation& x, bool causal);

// ---- 2. Ring attention ----
struct Ring {
  double h;      // hidden size
  double c;      // tokens per rank
  int n_c;       // context-parallel degree
  double g = 1;  // GQA group a/n_kv
  double e = 2;  // bytes per element
  bool causal = false;
  double b = 1;  // micro-batch: b sequences side by side, each split the same way
};
double ring_flops_per_round(const Ring& r);  // 4 c^2 h b
double ring_bytes_per_round(const Ring& r);  // K and V: 2 * c*h*e*b / g  (4chb/g for bf16)
double ring_bytes_per_layer(const Ring& r);  // (N_c - 1) * bytes per round
// Overlap condition: smallest c with compute >= transfer: F/W (x2 causal balanced, /g GQA, x e/2).
double ring_min_block(double flops_per_s, double bytes_per_s, double g, bool causal, double e);
double ring_memory_bytes(const Ring& r);  // six blocks of c*h*e*b (K, V divided by g)
// Causal work in units of full c x c blocks: contiguous N_c - 1/2 rounds of lockstep time,
// balanced (zig-zag) N_c/2.
double ring_causal_steps_contiguous(int n_c);
double ring_causal_steps_balanced(int n_c);
// Backward (METHODS.md section 5). Q, O, dO, lse and D stay; K/V blocks travel as in the
// forward, each with its dK/dV partial sums, which end back at the block's owner. e_grad: bytes
// per element of the travelling dK/dV (4: fp32 partial sums, as ring-flash-attention does).
double ring_bwd_flops_per_round(const Ring& r);  // 10 c^2 h b (full block; 2.5x the forward)
// K and V (2 c h b e / g) plus dK and dV (2 c h b e_grad / g).
double ring_bwd_bytes_per_round(const Ring& r, double e_grad);
// K/V make N_c - 1 hops, the dK/dV partial sums N_c (the last one home to the block's owner):
// (N_c-1) 2chbe/g + N_c 2chb e_grad/g; 0 for N_c = 1.
double ring_bwd_bytes_per_layer(const Ring& r, double e_grad);
// Backward overlap condition 10 c^2 h / F_b >= 2ch(e + e_grad)/(g W):
// c >= (e + e_grad)/(5g) F_b/W (x2 causal balanced): 0.8 F_b/(gW) with bf16 K/V and partial
// sums, 1.2 F_b/(gW) with fp32 partial sums.
double ring_min_block_bwd(double flops_bwd_per_s, double bytes_per_s, double g,
                          bool causal_balanced, double e, double e_grad);
// Blocks the backward holds: Q, O, dO (c h b e each), dQ (c h b e_grad), current and incoming
// K/V (4 c h b e / g), three dK/dV blocks in e_grad (accumulated, arriving, leaving):
// c h b (3e + e_grad) + c h b/g (4e + 6 e_grad).
double ring_bwd_memory_bytes(const Ring& r, double e_grad);
// All-gather variant's backward: dK, dV of all s tokens reduce-scattered back to their owners,
// (N_c-1)/N_c * 2 s h b e_grad / g per rank (its forward all-gather moves the ring's K/V bytes).
double ring_allgather_bwd_bytes_per_layer(double s, double h, int n_c, double g, double e_grad,
                                          double b);

// ---- 3. DeepSpeed-Ulysses ----
// Bytes per rank per layer, forward: Q, K, V and output all-to-alls (K, V divided by g).
double ulysses_bytes_per_layer(double s, double h, int n_c, double g, double e);
// Largest Ulysses degree the head counts allow: must divide a and n_kv.
bool ulysses_degree_ok(int n_c, int heads, int kv_heads);
// Ulysses x ring hybrid over N_c ranks: Ulysses inside groups of u ranks, the ring across the
// N_c/u groups (u = N_c: plain Ulysses; u = 1: plain ring). A group holds s u/N_c tokens; after
// its all-to-alls a rank holds them all for a/u heads, and the ring moves K/V blocks of those
// tokens for n_kv/u heads. The ring part as a Ring (hidden h/u, c = s u/N_c, N_c/u ranks):
Ring hybrid_ring(double s, double h, int n_c, int u, double g, double e, bool causal, double b = 1);
// Bytes per rank per layer, forward, of the group's all-to-alls (K/V heads split u ways), for
// one sequence (the bytes grow with b like s).
double hybrid_ulysses_bytes_per_layer(double s, double h, int n_c, int u, double g, double e);
// Backward: dO takes the output's all-to-all in reverse, dQ, dK, dV go back: the same bytes as
// the forward (one sequence, like the forward's).
double ulysses_bwd_bytes_per_layer(double s, double h, int n_c, double g, double e);
double hybrid_ulysses_bwd_bytes_per_layer(double s, double h, int n_c, int u, double g, double e);

// ---- 4. MoE expert parallelism ----
// Expected dispatch + combine bytes per rank, uniform routing: 2 k T h e (N_e - 1)/N_e.
double moe_a2a_bytes_per_rank(double k, double tokens, double h, int n_e, double e);
// FLOPs per (token, expert) pair: 4 h d_ff (two-matrix MLP) or 6 h d_ff (SwiGLU).
double moe_expert_flops_per_pair(double h, double d_ff, bool swiglu);
// All-to-all time / expert time: (F/W) ((N_e-1)/N_e) / d_ff, divided by 1.5 for SwiGLU.
double moe_a2a_to_expert_ratio(double flops_per_s, double bytes_per_s, int n_e, double d_ff,
                               bool swiglu);
// Hiding the all-to-all behind another micro-batch: with A the layer's all-to-all time and X
// the compute beside it (both for all M micro-batches), the pipelined layer takes about
// max(A, X) + min(A, X) / M (the fill and the drain).
double moe_overlap_step(double a2a_s, double compute_s, int microbatches);
// The crossing: the experts' compute hides the all-to-all from d_ff* = (F/W) (N_e-1)/N_e on
// (e/2 for rows of e bytes: 1 in bf16), divided by 1.5 for SwiGLU.
double moe_overlap_dff_star(double flops_per_s, double bytes_per_s, int n_e, double e, bool swiglu);
// Tokens an expert accepts: CF * k * N / E.
double moe_capacity(double capacity_factor, double k, double tokens, int experts);
// Switch load-balancing loss alpha * E * sum f_i P_i over E experts.
double moe_aux_loss(const double* f, const double* p, int experts, double alpha);
// Training step (METHODS.md section 5, "MoE backward"): the backward sends the output
// gradients along the dispatch's route and the input gradients along the combine's, so the
// forward + backward dispatch/combine bytes per rank (uniform) are 4 k T h e (N_e - 1)/N_e.
double moe_a2a_bytes_per_rank_fwd_bwd(double k, double tokens, double h, int n_e, double e);
// Backward expert FLOPs per (token, expert) pair: input and weight gradients, 2x the forward's.
double moe_expert_bwd_flops_per_pair(double h, double d_ff, bool swiglu);
// The backward's all-to-all / expert time ratio: the forward's bytes over twice its FLOPs.
double moe_bwd_a2a_to_expert_ratio(double flops_per_s, double bytes_per_s, int n_e, double d_ff,
                                   bool swiglu);
// Collective calls of one MoE layer per pass. Forward: the counts all-to-all, dispatch and
// combine all-to-all-v's, and with a capacity the all-gather of the (expert, gate) pairs.
// Backward: two all-to-all-v's and the all-gather of the routed counts (the aux loss's f_i).
struct MoeCollectives {
  int all_to_all = 0, all_to_all_v = 0, all_gather = 0;
  int total() const { return all_to_all + all_to_all_v + all_gather; }
};
// Hierarchical dispatch (section 4.4) adds the rail's counts all-to-all and records
// all-to-all-v, and makes every row exchange two (rail and node); its backward sends the gate
// gradients home in one more all-to-all-v.
MoeCollectives moe_collectives_fwd(bool capacity, bool hierarchical = false);
MoeCollectives moe_collectives_bwd(bool hierarchical = false);
// Rows per token that cross nodes in the dispatch (section 4.4), uniform routing of k distinct
// experts among E spread evenly over M nodes: flat sends one per copy on another node,
// k (M - 1)/M; hierarchical one per other node holding any of its copies,
// (M - 1)(1 - C(E - E/M, k) / C(E, k)).
double moe_inter_rows_per_token_flat(int k, int experts, int nodes);
double moe_inter_rows_per_token_hier(int k, int experts, int nodes);
// Control bytes per rank (8-byte counts; exact, independent of the routing). Forward: E/N_e
// counts to each other rank, and with a capacity 2 k T values ((expert, gate) pairs) to each;
// backward: the E routed counts to each other rank.
double moe_control_bytes_fwd(int experts, int n_e, double k, double tokens, bool capacity);
double moe_control_bytes_bwd(int experts, int n_e);

// ---- 6. The axes on one mesh (the composed block) ----
// One pre-LN block (TP+SP, fused attention) on a T x C x D mesh; with experts > 0 its MLP is an
// MoE of `experts` experts of width d_ff over EP groups of E ranks (E divides C D).
struct MeshBlock {
  double s = 0, b = 1, h = 0, a = 1, n_kv = 1, d_ff = 0;
  int T = 1, C = 1, D = 1;
  CpMethod cp = CpMethod::ring;
  int u = 1;  // hybrid's Ulysses degree (ulysses: C)
  int experts = 0, E = 1;
  double k = 2;
  bool swiglu = false;
  double e = 2;                    // bytes per element
  double e_grad = 2;               // the ring's travelling dK/dV partial sums
  double lse_e = 4;                // the attention kernel's log-sum-exp
  bool unfused_attention = false;  // scores through HBM (Megatron-LM before FlashAttention)
  double c() const { return s / C; }
  double g() const { return a / n_kv; }
  double rows() const { return c() * b; }  // a TP group's rows; a rank holds rows / T under SP
};
// Bytes each rank sends per step on each axis (the forward; with `backward` the training
// step), counted as the transport counts them (all-reduce 2 (n-1)/n, reduce-scatter and
// all-gather (n-1)/n of the whole):
// TP: the layer's all-gathers and reduce-scatters on n = c b h e (dense 4 (T-1)/T n forward,
// 10 with the backward; MoE in place of the MLP 2 and 5), the LayerNorm gradients' all-reduce
// (4h) and, with experts, the router's (h E), both partial sums over the sequence shards.
double mesh_tp_bytes(const MeshBlock& m, bool backward);
// CP over the TP rank's a/T heads: ring (C-1) 2 c b (n_kv/T) d e forward, the backward K/V
// again plus C hops of dK/dV; all-gather the same forward, dK/dV reduce-scattered back; Ulysses
// the Q, K, V and output all-to-alls inside groups of u (plus a ring across C/u groups).
double mesh_cp_bytes(const MeshBlock& m, bool backward);
// EP, uniform routing: dispatch + combine 2 k N h e (E-1)/E with N = c b / T tokens per rank,
// twice that with the backward (the exact figure comes from the routing: the benchmark's).
double mesh_ep_bytes_uniform(const MeshBlock& m, bool backward);
// Elements of the weights a rank holds: dense (LayerNorms 4h, QKV h (a + 2 n_kv) d / T, output
// h^2 / T, fc1 and fc2 2 h d_ff / T, the router h E) and its experts' (experts / E of them).
double mesh_dense_params(const MeshBlock& m);
double mesh_expert_params(const MeshBlock& m);
// The gradient sums after the backward: the dense gradients all-reduced over the C D ranks
// that hold them, each expert's over its T C D / E copies (with T > 1 the router's first
// over TP, counted in mesh_tp_bytes).
double mesh_grad_sum_bytes(const MeshBlock& m);
// The layer's activation ledger per rank (what its forward saves for the backward; the CP
// part keeps Q, K, V and lse itself when C > 1, the MoE its input): with T, e = 2, MHA, a dense
// MLP of 4h and C = 1 this is METHODS.md's 34 c b h / T plus the lse.
double mesh_ledger_bytes(const MeshBlock& m);

}  // namespace suite::model

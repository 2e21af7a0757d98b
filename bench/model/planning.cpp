#include "bench/model/planning.hpp"

#include <algorithm>
#include <cstdio>

#include "common/formulas/model.hpp"

namespace suite::plan {
namespace {

namespace m = suite::model;

void line(const char* what, double v, const char* unit) {
  std::printf("  %-52s %16.6g %s\n", what, v, unit);
}

void header(const char* section, const Inputs& in) {
  std::printf("  -- %s at F=%g FLOP/s, W=%g B/s; totals over L=%d layers --\n", section, in.flops,
              in.bw, in.layers);
}

// The stable line scripts/envs/sweep.py parses: section, predicted forward time of the whole model
// per rank, bytes per rank per forward step, activation / working memory per rank.
void prediction(const char* section, double step_s, double bytes, double memory) {
  std::printf("prediction: section=%s step_s=%.6g bytes_per_rank=%.6g memory_bytes=%.6g\n", section,
              step_s, bytes, memory);
}

m::Activation activation(const Inputs& in, int t) {
  return {in.s, in.b, in.h, in.a, t, in.e, in.d_ff / in.h};
}

// One layer's ring attention backward on a rank: N_c rounds of compute at F_b (half a block per
// round for a balanced causal layout). K/V and the dK/dV partial sums of round k travel while
// round k+1 computes (N_c - 1 overlapped rounds); the last dK/dV hop home follows the last
// round's compute, exposed.
struct RingBwd {
  double time, exposed;
};
RingBwd ring_bwd_time(const m::Ring& r, bool causal, const Inputs& in) {
  const double compute = m::ring_bwd_flops_per_round(r) * (causal ? 0.5 : 1) / in.flops_bwd;
  if (r.n_c <= 1) return {compute, 0};
  const double xfer = m::ring_bwd_bytes_per_round(r, in.e_grad) / in.bw;
  const double last_hop = (m::ring_bwd_bytes_per_layer(r, in.e_grad) -
                           (r.n_c - 1) * m::ring_bwd_bytes_per_round(r, in.e_grad)) /
                          in.bw;
  return {compute + (r.n_c - 1) * std::max(compute, xfer) + last_hop,
          (r.n_c - 1) * std::max(0.0, xfer - compute) + last_hop};
}

}  // namespace

void print_sp_plan(const Inputs& in) {
  const m::Activation x = activation(in, in.t), one = activation(in, 1);
  const double L = in.layers;
  header("TP/SP", in);
  line("activations/layer, no parallelism, fused kernel: 34sbh",
       m::act_bytes_no_parallel_flash(one), "B");
  line("activations/layer, no parallelism, unfused", m::act_bytes_no_parallel(one), "B");
  const double compute = m::layer_flops_per_rank(x, in.causal) / in.flops;
  const double comm = m::tp_layer_comm_bytes_per_rank(in.s, in.b, in.h, in.t, in.e) / in.bw;
  line("compute per layer fwd per rank (FLOPs/(tF))", compute, "s");
  line("TP or SP collectives per layer fwd per rank", comm, "s");
  line("communication / compute", comm / compute, "");
  line("model fwd per rank, no overlap: L(compute+comm)", L * (compute + comm), "s");
  line("model comm per rank per step, fwd (TP or SP)",
       L * m::tp_layer_comm_bytes_per_rank(in.s, in.b, in.h, in.t, in.e), "B");
  // Backward: GEMM gradients at F, attention backward at F_b; TP 2 all-reduces, SP 2 RS + 4 AG
  // and the LayerNorm gradients' all-reduce.
  const double attn_bwd_flops = m::layer_bwd_attention_flops_per_rank(x, in.causal);
  const double compute_bwd =
      (m::layer_bwd_flops_per_rank(x, in.causal) - attn_bwd_flops) / in.flops +
      attn_bwd_flops / in.flops_bwd;
  const double n = in.s * in.b * in.h * in.e;
  const double tp_bwd_bytes =
      m::layer_collectives_bytes_per_rank(m::tp_layer_collectives(true), n, in.t);
  const double sp_bwd_bytes =
      m::layer_collectives_bytes_per_rank(m::sp_layer_collectives(true), n, in.t) +
      m::sp_layernorm_grad_bytes_per_rank(in.h, in.t, in.e);
  const double tp_step_bytes = m::tp_layer_comm_bytes_fwd_bwd(in.s, in.b, in.h, in.t, in.e);
  const double sp_step_bytes = m::sp_layer_comm_bytes_fwd_bwd(in.s, in.b, in.h, in.t, in.e) +
                               m::sp_layernorm_grad_bytes_per_rank(in.h, in.t, in.e);
  line("compute per layer bwd per rank (GEMMs F, attn F_b)", compute_bwd, "s");
  line("TP collectives per layer bwd per rank", tp_bwd_bytes / in.bw, "s");
  line("SP collectives + LayerNorm grads per layer bwd", sp_bwd_bytes / in.bw, "s");
  line("model train step per rank, TP, no overlap",
       L * (compute + compute_bwd + tp_step_bytes / in.bw), "s");
  line("model train step per rank, TP+SP, no overlap",
       L * (compute + compute_bwd + sp_step_bytes / in.bw), "s");
  line("model comm per rank per step, fwd+bwd, TP", L * tp_step_bytes, "B");
  line("model comm per rank per step, fwd+bwd, TP+SP", L * sp_step_bytes, "B");
  line("model activations, no parallelism, fused", L * m::act_bytes_no_parallel_flash(one), "B");
  line("model activations, no parallelism, unfused", L * m::act_bytes_no_parallel(one), "B");
  line("model activations per rank, TP, fused", L * m::act_bytes_tp_flash(x), "B");
  line("model activations per rank, TP+SP, fused", L * m::act_bytes_tp_sp_flash(x), "B");
  line("model activations per rank, TP+SP, unfused", L * m::act_bytes_tp_sp(x), "B");
  prediction("sp", L * (compute + comm),
             L * m::sp_layer_comm_bytes_per_rank(in.s, in.b, in.h, in.t, in.e),
             L * m::act_bytes_tp_sp_flash(x));
}

void print_ring_plan(const Inputs& in) {
  const m::Ring r{in.h, in.s / in.n_c, in.n_c, in.a / in.kv, in.e, in.causal, in.b};
  const double L = in.layers;
  header("ring", in);
  // Balanced (zig-zag) causal layout: half a block of work per round.
  const double round_compute = m::ring_flops_per_round(r) / in.flops * (in.causal ? 0.5 : 1);
  const double round_xfer = m::ring_bytes_per_round(r) / in.bw;
  const double layer = in.n_c * std::max(round_compute, round_xfer);
  line("attention per layer fwd, overlapped: N_c max(comp,xfer)", layer, "s");
  line("of which exposed transfer", in.n_c * std::max(0.0, round_xfer - round_compute), "s");
  line("model attention fwd per rank (L layers)", L * layer, "s");
  line("model ring bytes per rank, fwd", L * m::ring_bytes_per_layer(r), "B");
  const RingBwd bwd = ring_bwd_time(r, in.causal, in);
  const double bwd_bytes = m::ring_bwd_bytes_per_layer(r, in.e_grad);
  line("attention per layer bwd (last dK/dV hop exposed)", bwd.time, "s");
  line("of which exposed transfer (bwd)", bwd.exposed, "s");
  line("attention per layer fwd+bwd", layer + bwd.time, "s");
  line("model attention bwd per rank (L layers)", L * bwd.time, "s");
  line("model attention fwd+bwd per rank (L layers)", L * (layer + bwd.time), "s");
  line("model ring bytes per rank, bwd", L * bwd_bytes, "B");
  line("model ring bytes per rank, fwd+bwd", L * (m::ring_bytes_per_layer(r) + bwd_bytes), "B");
  prediction("ring", L * layer, L * m::ring_bytes_per_layer(r), m::ring_memory_bytes(r));
}

void print_ulysses_plan(const Inputs& in) {
  const double g = in.a / in.kv, L = in.layers;
  header("Ulysses", in);
  const double a2a_bytes =
      in.b * m::hybrid_ulysses_bytes_per_layer(in.s, in.h, in.n_c, in.u, g, in.e);
  const double a2a = a2a_bytes / in.bw;
  // After the all-to-alls a rank attends its group's s u/N_c queries for a/u heads against
  // all s keys: N_c/u ring rounds (one for plain Ulysses), each hiding its K/V transfer
  // behind the round's attention where it can. 4 s^2 h / N_c FLOPs per rank in all.
  const m::Ring ring = m::hybrid_ring(in.s, in.h, in.n_c, in.u, g, in.e, in.causal, in.b);
  const double round_compute = m::ring_flops_per_round(ring) * (in.causal ? 0.5 : 1) / in.flops;
  const double round_xfer = ring.n_c > 1 ? m::ring_bytes_per_round(ring) / in.bw : 0.0;
  const double attention = ring.n_c * std::max(round_compute, round_xfer);
  const double bytes = a2a_bytes + m::ring_bytes_per_layer(ring);
  line("all-to-alls per layer fwd per rank (exposed)", a2a, "s");
  line("attention per layer fwd per rank (with the ring part)", attention, "s");
  line("model attention + all-to-alls fwd per rank", L * (a2a + attention), "s");
  line("model all-to-all and ring bytes per rank, fwd", L * bytes, "B");
  // Backward: dO's all-to-all in, dQ, dK, dV out (the forward's bytes); the ring part as ring
  // attention's backward.
  const double a2a_bwd_bytes =
      in.b * m::hybrid_ulysses_bwd_bytes_per_layer(in.s, in.h, in.n_c, in.u, g, in.e);
  const RingBwd attention_bwd = ring_bwd_time(ring, in.causal, in);
  const double bytes_bwd = a2a_bwd_bytes + m::ring_bwd_bytes_per_layer(ring, in.e_grad);
  line("all-to-alls per layer bwd per rank (exposed)", a2a_bwd_bytes / in.bw, "s");
  line("attention bwd per layer per rank at F_b (with ring)", attention_bwd.time, "s");
  line("model attention + all-to-alls bwd per rank",
       L * (a2a_bwd_bytes / in.bw + attention_bwd.time), "s");
  line("model attention + all-to-alls fwd+bwd per rank",
       L * (a2a + attention + a2a_bwd_bytes / in.bw + attention_bwd.time), "s");
  line("model all-to-all and ring bytes per rank, bwd", L * bytes_bwd, "B");
  line("model all-to-all and ring bytes per rank, fwd+bwd", L * (bytes + bytes_bwd), "B");
  prediction("ulysses", L * (a2a + attention), L * bytes, 0);
}

void print_moe_plan(const Inputs& in) {
  const double L = in.layers;
  header("MoE", in);
  const double bytes = m::moe_a2a_bytes_per_rank(in.k, in.tokens, in.h, in.n_e, in.e);
  const double expert =
      in.k * in.tokens * m::moe_expert_flops_per_pair(in.h, in.d_ff, in.swiglu) / in.flops;
  line("dispatch + combine per MoE layer fwd per rank", bytes / in.bw, "s");
  line("expert compute per MoE layer fwd per rank (k T pairs)", expert, "s");
  line("model MoE fwd per rank, no overlap (L layers)", L * (bytes / in.bw + expert), "s");
  line("model all-to-all bytes per rank, fwd", L * bytes, "B");
  // Backward: the same bytes (both routes retraced), twice the expert FLOPs.
  const double bwd_bytes =
                   m::moe_a2a_bytes_per_rank_fwd_bwd(in.k, in.tokens, in.h, in.n_e, in.e) - bytes,
               bwd_expert = in.k * in.tokens *
                            m::moe_expert_bwd_flops_per_pair(in.h, in.d_ff, in.swiglu) / in.flops;
  const double step = bytes / in.bw + expert + bwd_bytes / in.bw + bwd_expert;
  line("dispatch + combine per MoE layer bwd per rank", bwd_bytes / in.bw, "s");
  line("expert compute per MoE layer bwd per rank (2x fwd)", bwd_expert, "s");
  line("MoE layer fwd + bwd per rank, no overlap", step, "s");
  line("model MoE fwd + bwd per rank, no overlap (L layers)", L * step, "s");
  line("model all-to-all bytes per rank, fwd + bwd", L * (bytes + bwd_bytes), "B");
  prediction("moe", L * (bytes / in.bw + expert), L * bytes, 0);
}

}  // namespace suite::plan

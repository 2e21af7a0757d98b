#include "bench/model/planning.hpp"

#include <algorithm>
#include <cstdio>

#include "common/model.hpp"

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

// The stable line scripts/sweep.py parses: section, predicted forward time of the whole model
// per rank, bytes per rank per forward step, activation / working memory per rank.
void prediction(const char* section, double step_s, double bytes, double memory) {
  std::printf("prediction: section=%s step_s=%.6g bytes_per_rank=%.6g memory_bytes=%.6g\n", section,
              step_s, bytes, memory);
}

m::Activation activation(const Inputs& in, int t) {
  return {in.s, in.b, in.h, in.a, t, in.e, in.d_ff / in.h};
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
  line("model comm per rank per step, fwd (x2 with bwd)",
       L * m::tp_layer_comm_bytes_per_rank(in.s, in.b, in.h, in.t, in.e), "B");
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
  line("model ring bytes per rank, fwd (bwd about 2x more)", L * m::ring_bytes_per_layer(r), "B");
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

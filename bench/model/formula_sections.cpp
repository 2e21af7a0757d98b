#include "bench/model/formula_sections.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "common/formulas/model.hpp"

namespace suite::model_cli {
namespace {

namespace m = suite::model;

void line(const char* what, double v, const char* unit) {
  std::printf("  %-52s %16.6g %s\n", what, v, unit);
}

void counts(const char* what, int fwd, int bwd) {
  const std::string v =
      std::to_string(fwd) + ", " + std::to_string(bwd) + ", " + std::to_string(fwd + bwd);
  std::printf("  %-52s %16s\n", what, v.c_str());
}

}  // namespace

void print_tp_overlap(const Params& p, double e) {
  const double d_ff = p.d_ff > 0 ? p.d_ff : 4 * p.h;
  std::printf("TP+SP comm-GEMM overlap (s=%g b=%g h=%g a=%g n_kv=%g d_ff=%g t=%d, %s, F=%g W=%g)\n",
              p.s, p.b, p.h, p.a, p.kv, d_ff, p.t, p.dtype.c_str(), p.flops, p.bw);
  std::printf("  h/t = %g; an op hides its transfer iff h/t >= e F / (2 c W)\n", p.h / p.t);
  std::printf("  %-16s %-15s %6s %10s %7s %11s %11s %11s %11s %11s\n", "op", "collective", "c",
              "threshold", "hidden", "gemm_us", "comm_us", "serial_us", "overlap_us", "exposed_us");
  double serial = 0, overlapped = 0;
  for (const m::TpOverlapOp& op :
       m::tp_overlap_ops(p.s, p.b, p.h, p.a, p.kv, d_ff, p.swiglu, p.t, e, p.flops, p.bw)) {
    std::printf("  %-16s %-15s %6.3g %10.1f %7s %11.2f %11.2f %11.2f %11.2f %11.2f\n", op.name,
                op.collective, op.c, op.threshold, p.h / p.t >= op.threshold ? "yes" : "no",
                op.gemm_s() * 1e6, (p.t - 1) * op.step_comm_s * 1e6, op.serial_s * 1e6,
                op.overlapped_s * 1e6, op.exposed_s() * 1e6);
    serial += op.serial_s;
    overlapped += op.overlapped_s;
  }
  line("the ten ops, fwd+bwd, x L layers, serial", serial * p.layers, "s");
  line("the ten ops, fwd+bwd, x L layers, overlapped", overlapped * p.layers, "s");
}

void print_sp(const Params& p, double e) {
  std::printf("Megatron TP vs SP (s=%g b=%g h=%g a=%g t=%d, %s)\n", p.s, p.b, p.h, p.a, p.t,
              p.dtype.c_str());
  line("TP comm per layer fwd per rank (2 all-reduces)",
       m::tp_layer_comm_bytes_per_rank(p.s, p.b, p.h, p.t, e), "B");
  line("SP comm per layer fwd per rank (2 RS + 2 AG)",
       m::sp_layer_comm_bytes_per_rank(p.s, p.b, p.h, p.t, e), "B");
  m::Activation x{p.s, p.b, p.h, p.a, p.t, e, (p.d_ff > 0 ? p.d_ff : 4 * p.h) / p.h};
  line("activations/layer, no parallelism: sbh(34+5as/h)", m::act_bytes_no_parallel(x), "B");
  line("activations/layer, TP: sbh(10+24/t+5as/(ht))", m::act_bytes_tp(x), "B");
  line("activations/layer, TP+SP: sbh/t(34+5as/h)", m::act_bytes_tp_sp(x), "B");
  line("activations/layer, TP, flash: sbh(10+24/t)", m::act_bytes_tp_flash(x), "B");
  line("activations/layer, TP+SP, flash: 34sbh/t", m::act_bytes_tp_sp_flash(x), "B");
  // Backward (METHODS.md section 5): the collectives of each pass and their bytes.
  const m::LayerCollectives tp_f = m::tp_layer_collectives(false),
                            tp_b = m::tp_layer_collectives(true),
                            sp_f = m::sp_layer_collectives(false),
                            sp_b = m::sp_layer_collectives(true);
  const double n = p.s * p.b * p.h * e;
  counts("TP all-reduces per layer: fwd, bwd, fwd+bwd", tp_f.all_reduce, tp_b.all_reduce);
  counts("SP reduce-scatters per layer: fwd, bwd, fwd+bwd", sp_f.reduce_scatter,
         sp_b.reduce_scatter);
  counts("SP all-gathers per layer: fwd, bwd, fwd+bwd", sp_f.all_gather, sp_b.all_gather);
  line("TP comm per layer bwd per rank (2 all-reduces)",
       m::layer_collectives_bytes_per_rank(tp_b, n, p.t), "B");
  line("TP comm per layer fwd+bwd per rank: 8(t-1)/t sbhe",
       m::tp_layer_comm_bytes_fwd_bwd(p.s, p.b, p.h, p.t, e), "B");
  line("SP comm per layer bwd per rank (2 RS + 4 AG)",
       m::layer_collectives_bytes_per_rank(sp_b, n, p.t), "B");
  line("SP comm per layer fwd+bwd per rank: 10(t-1)/t sbhe",
       m::sp_layer_comm_bytes_fwd_bwd(p.s, p.b, p.h, p.t, e), "B");
  line("SP LayerNorm grads all-reduce per layer (4h elems)",
       m::sp_layernorm_grad_bytes_per_rank(p.h, p.t, e), "B");
  line("layer FLOPs per rank fwd", m::layer_flops_per_rank(x, p.causal), "FLOP");
  line("layer FLOPs per rank bwd (GEMMs 2x, attention 2.5x)",
       m::layer_bwd_flops_per_rank(x, p.causal), "FLOP");
  line("  of which attention bwd", m::layer_bwd_attention_flops_per_rank(x, p.causal), "FLOP");
}

void print_ring(const Params& p, double e, double e_grad, double flops_bwd) {
  double g = p.a / p.kv;
  m::Ring r{p.h, p.s / p.n_c, p.n_c, g, e, p.causal, p.b};
  std::printf("\nRing attention (s=%g b=%g N_c=%d c=%g h=%g g=%g %s, F=%g FLOP/s, W=%g B/s)\n", p.s,
              p.b, p.n_c, r.c, p.h, g, p.causal ? "causal" : "full", p.flops, p.bw);
  line("FLOPs per round 4c^2hb", m::ring_flops_per_round(r), "FLOP");
  line("bytes per round (K and V)", m::ring_bytes_per_round(r), "B");
  line("compute time per round", m::ring_flops_per_round(r) / p.flops * (p.causal ? 0.5 : 1), "s");
  line("transfer time per round", m::ring_bytes_per_round(r) / p.bw, "s");
  double c_min = m::ring_min_block(p.flops, p.bw, g, p.causal, e);
  line("minimum block size for overlap c >= F/W (refined)", c_min, "tokens");
  std::printf("  %-52s %16s\n", "overlap holds at this c?",
              r.c >= c_min ? "yes" : "NO: transfer exposed");
  line("bytes per layer fwd per rank (N_c-1) x round", m::ring_bytes_per_layer(r), "B");
  line("memory per rank (six blocks)", m::ring_memory_bytes(r), "B");
  line("causal steps, contiguous layout (N_c - 1/2)", m::ring_causal_steps_contiguous(p.n_c),
       "blocks");
  line("causal steps, zig-zag layout (N_c/2)", m::ring_causal_steps_balanced(p.n_c), "blocks");
  // Backward: K/V travel as in the forward, each with its dK/dV partial sums.
  std::printf("  backward: F_b=%g FLOP/s, dK/dV partial sums in %s\n", flops_bwd,
              p.grad_dtype.c_str());
  line("backward FLOPs per round 10c^2hb", m::ring_bwd_flops_per_round(r), "FLOP");
  line("backward bytes per round (K, V and dK, dV)", m::ring_bwd_bytes_per_round(r, e_grad), "B");
  line("backward compute time per round at F_b",
       m::ring_bwd_flops_per_round(r) / flops_bwd * (p.causal ? 0.5 : 1), "s");
  line("backward transfer time per round", m::ring_bwd_bytes_per_round(r, e_grad) / p.bw, "s");
  const double c_min_bwd = m::ring_min_block_bwd(flops_bwd, p.bw, g, p.causal, e, e_grad);
  line("minimum block size for bwd overlap (e+e_g)F_b/(5gW)", c_min_bwd, "tokens");
  std::printf("  %-52s %16s\n", "backward overlap holds at this c?",
              p.n_c == 1         ? "N_c = 1: no hops"
              : r.c >= c_min_bwd ? "yes"
                                 : "NO: transfer exposed");
  line("bytes per layer bwd per rank (N_c-1) KV + N_c dKV", m::ring_bwd_bytes_per_layer(r, e_grad),
       "B");
  line("bytes per layer fwd+bwd per rank",
       m::ring_bytes_per_layer(r) + m::ring_bwd_bytes_per_layer(r, e_grad), "B");
  line("backward memory per rank (Q,O,dO,dQ,2 K/V,3 dK/dV)", m::ring_bwd_memory_bytes(r, e_grad),
       "B");
  line("all-gather variant: bytes per layer bwd (RS dK, dV)",
       m::ring_allgather_bwd_bytes_per_layer(p.s, p.h, p.n_c, g, e_grad, p.b), "B");
}

void print_ulysses(const Params& p, double e, double e_grad) {
  double g = p.a / p.kv;
  const int u = p.u > 0 ? p.u : p.n_c;
  std::printf("\nDeepSpeed-Ulysses (s=%g b=%g h=%g N_c=%d a=%g n_kv=%g", p.s, p.b, p.h, p.n_c, p.a,
              p.kv);
  if (u == p.n_c) {
    std::printf(")\n");
    const double fwd = p.b * m::ulysses_bytes_per_layer(p.s, p.h, p.n_c, g, e),
                 bwd = p.b * m::ulysses_bwd_bytes_per_layer(p.s, p.h, p.n_c, g, e);
    line("bytes per layer fwd per rank (4 all-to-alls)", fwd, "B");
    line("bytes per layer bwd per rank (dO in; dQ, dK, dV out)", bwd, "B");
    line("bytes per layer fwd+bwd per rank", fwd + bwd, "B");
  } else {  // a hybrid: Ulysses in groups of u ranks, the ring across N_c/u groups
    const m::Ring ring = m::hybrid_ring(p.s, p.h, p.n_c, u, g, e, p.causal, p.b);
    std::printf("; hybrid: Ulysses degree u=%d, ring across %d groups)\n", u, ring.n_c);
    const double a2a = p.b * m::hybrid_ulysses_bytes_per_layer(p.s, p.h, p.n_c, u, g, e);
    line("all-to-all bytes per layer fwd per rank (group of u)", a2a, "B");
    line("ring bytes per layer fwd per rank (N_c/u - 1 rounds)", m::ring_bytes_per_layer(ring),
         "B");
    line("bytes per layer fwd per rank, both parts", a2a + m::ring_bytes_per_layer(ring), "B");
    line("ring block per rank after the all-to-alls (s u/N_c)", ring.c, "tokens");
    const double a2a_bwd = p.b * m::hybrid_ulysses_bwd_bytes_per_layer(p.s, p.h, p.n_c, u, g, e);
    const double ring_bwd = m::ring_bwd_bytes_per_layer(ring, e_grad);
    line("all-to-all bytes per layer bwd per rank (group of u)", a2a_bwd, "B");
    line("ring bytes per layer bwd per rank (K/V and dK/dV)", ring_bwd, "B");
    line("bytes per layer bwd per rank, both parts", a2a_bwd + ring_bwd, "B");
    line("bytes per layer fwd+bwd per rank, both parts",
         a2a + m::ring_bytes_per_layer(ring) + a2a_bwd + ring_bwd, "B");
  }
  bool ok = m::ulysses_degree_ok(u, static_cast<int>(p.a), static_cast<int>(p.kv));
  // a % N_c is a rule (checked up front); the K/V heads may be replicated instead of split.
  std::printf("  %-52s %16s\n", "degree divides the K/V heads?",
              ok ? "yes" : "NO: replicate K/V heads (more bytes) or combine with ring");
}

void print_moe(const Params& p, double e) {
  double d_ff = p.d_ff > 0 ? p.d_ff : 4 * p.h;
  std::printf("\nMoE expert parallelism (E=%d N_e=%d k=%g T=%g h=%g d_ff=%g %s)\n", p.experts,
              p.n_e, p.k, p.tokens, p.h, d_ff, p.swiglu ? "SwiGLU" : "two-matrix MLP");
  line("dispatch + combine bytes per rank (uniform)",
       m::moe_a2a_bytes_per_rank(p.k, p.tokens, p.h, p.n_e, e), "B");
  line("expert FLOPs per (token, expert) pair", m::moe_expert_flops_per_pair(p.h, d_ff, p.swiglu),
       "FLOP");
  line("all-to-all time / expert time",
       m::moe_a2a_to_expert_ratio(p.flops, p.bw, p.n_e, d_ff, p.swiglu), "");
  // METHODS.md section 4: (F/W)(N_e-1)/N_e, x e/2, /1.5 for SwiGLU.
  line("overlap crossing d_ff* (experts hide the all-to-all above)",
       m::moe_overlap_dff_star(p.flops, p.bw, p.n_e, e, p.swiglu), "");
  line("dispatch + combine time per rank at W (uniform)",
       m::moe_a2a_bytes_per_rank(p.k, p.tokens, p.h, p.n_e, e) / p.bw, "s");
  const double expert_flops = p.k * p.tokens * m::moe_expert_flops_per_pair(p.h, d_ff, p.swiglu);
  line("expert FLOPs per rank (k T pairs, uniform)", expert_flops, "FLOP");
  line("expert compute time per rank at F", expert_flops / p.flops, "s");
  line("expert capacity CF*k*N/E (N = T*N_e)",
       m::moe_capacity(p.capacity_factor, p.k, p.tokens * p.n_e, p.experts), "tokens");
  std::vector<double> uniform(p.experts, 1.0 / p.experts);
  line("aux loss at uniform routing (alpha=1e-2)",
       m::moe_aux_loss(uniform.data(), uniform.data(), p.experts, 1e-2), "");
  // The training step (METHODS.md section 5): collectives and bytes per pass, backward FLOPs.
  const bool capacity = p.capacity_factor > 0;
  const m::MoeCollectives fwd = m::moe_collectives_fwd(capacity), bwd = m::moe_collectives_bwd();
  std::printf("  -- training step, per MoE layer and rank (%s) --\n",
              capacity ? "with a capacity" : "dropless");
  line("fwd all-to-all calls (counts)", fwd.all_to_all, "");
  line("fwd all-to-all-v calls (dispatch, combine)", fwd.all_to_all_v, "");
  line("fwd all-gather calls (routing, under a capacity)", fwd.all_gather, "");
  line("bwd all-to-all-v calls (gradients out and home)", bwd.all_to_all_v, "");
  line("bwd all-gather calls (routed counts for f_i)", bwd.all_gather, "");
  line("fwd control bytes (counts, routing)",
       m::moe_control_bytes_fwd(p.experts, p.n_e, p.k, p.tokens, capacity), "B");
  line("bwd control bytes (routed counts)", m::moe_control_bytes_bwd(p.experts, p.n_e), "B");
  line("bwd dispatch + combine bytes (uniform)",
       m::moe_a2a_bytes_per_rank(p.k, p.tokens, p.h, p.n_e, e), "B");
  line("fwd + bwd dispatch + combine bytes 4kThe(N_e-1)/N_e",
       m::moe_a2a_bytes_per_rank_fwd_bwd(p.k, p.tokens, p.h, p.n_e, e), "B");
  line("bwd expert FLOPs per (token, expert) pair (2x fwd)",
       m::moe_expert_bwd_flops_per_pair(p.h, d_ff, p.swiglu), "FLOP");
  line("bwd expert FLOPs per rank (k T pairs, uniform)",
       p.k * p.tokens * m::moe_expert_bwd_flops_per_pair(p.h, d_ff, p.swiglu), "FLOP");
  line("bwd all-to-all time / expert time",
       m::moe_bwd_a2a_to_expert_ratio(p.flops, p.bw, p.n_e, d_ff, p.swiglu), "");
  line("model collective calls fwd + bwd (L layers)", p.layers * (fwd.total() + bwd.total()), "");
  line("model expert FLOPs per rank fwd + bwd (L layers)",
       p.layers * p.k * p.tokens *
           (m::moe_expert_flops_per_pair(p.h, d_ff, p.swiglu) +
            m::moe_expert_bwd_flops_per_pair(p.h, d_ff, p.swiglu)),
       "FLOP");
}

plan::Inputs plan_inputs(const Params& p, double e, double e_grad) {
  return {p.s,
          p.b,
          p.h,
          p.a,
          p.kv,
          p.d_ff > 0 ? p.d_ff : 4 * p.h,
          p.t,
          p.n_c,
          p.n_e,
          p.experts,
          p.k,
          p.tokens,
          p.flops,
          p.bw,
          e,
          p.causal,
          p.swiglu,
          p.layers,
          p.u > 0 ? p.u : p.n_c,
          p.flops_bwd.value_or(p.flops),
          e_grad};
}

}  // namespace suite::model_cli

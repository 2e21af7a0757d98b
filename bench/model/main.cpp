// model: prints what METHODS.md predicts for parameters and rates the user gives, so a run
// can be planned (block sizes, degrees, bytes) before a job is submitted. No MPI needed.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/model/mesh_section.hpp"
#include "bench/model/params.hpp"
#include "bench/model/plan_section.hpp"
#include "bench/model/planning.hpp"
#include "bench/model/varlen.hpp"
#include "bench/ring_attention/sweep_flags.hpp"
#include "common/harness/errors.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/options.hpp"
#include "common/harness/size_list.hpp"
#include "kernels/core/dtype.hpp"

namespace m = suite::model;

namespace {

using suite::model_cli::Params;

void line(const char* what, double v, const char* unit) {
  std::printf("  %-52s %16.6g %s\n", what, v, unit);
}

void counts(const char* what, int fwd, int bwd) {
  const std::string v =
      std::to_string(fwd) + ", " + std::to_string(bwd) + ", " + std::to_string(fwd + bwd);
  std::printf("  %-52s %16s\n", what, v.c_str());
}

// TP+SP with each collective cut into t ring steps beside its GEMM (METHODS.md 1.1).
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

suite::plan::Inputs plan_inputs(const Params& p, double e, double e_grad) {
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

}  // namespace

int main(int argc, char** argv) {
  Params p;
  std::string section = "all";
  CLI::App app(
      "Prints the METHODS.md predictions for the given sizes and rates (no run needed).\n"
      "Sizes no run could have are refused with exit status 2, by the rules of the sections\n"
      "printed: h % a, a % n_kv (ring, ulysses), a % t, d_ff % t, s % t (sp), s % N_c and,\n"
      "with --causal, s % 2N_c (ring), s % N_c and a % N_c (ulysses; a hybrid: N_c % u and\n"
      "a % u), E % N_e and k <= E (moe); so are rates <= 0 and unknown flags or values.\n"
      "sp, ring and ulysses also print the backward pass and the training step (fwd+bwd).",
      "model");
  app.add_option("--section", section,
                 "sp, ring, ulysses, moe or all; varlen (not in all): packed documents (--docs); "
                 "tp_overlap (not in all): TP+SP collectives cut into t ring steps beside their "
                 "GEMMs, each op's threshold on h/t and its serial and overlapped time at F, W; "
                 "mesh (not in all): the composed block on --tp x --cp x --dp ranks in each "
                 "--order, its training step's bytes, memory and time per axis on a two-tier "
                 "cluster (--bw, --lat inside a node; --bw-inter, --lat-inter across); plan (not "
                 "in all): every mesh of --gpus for the model, sequence and --global-tokens, the "
                 "ones that fit --memory-gb, ranked by step time at a --calibration file's rates "
                 "(or the flags')")
      ->check(CLI::IsMember(
          {"all", "sp", "ring", "ulysses", "moe", "varlen", "tp_overlap", "mesh", "plan"}))
      ->capture_default_str();
  suite::model_cli::VarlenOptions varlen;
  std::string cp_sweep, layouts = "contiguous,zigzag,striped,doc_zigzag,balanced";
  app.add_option("--docs", varlen.docs,
                 "varlen: document lengths of the packed sequence, as ring_attention --docs "
                 "takes them (fixed:L, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA, pareto:MIN:ALPHA, "
                 "file:PATH)");
  app.add_option("--cp-sweep", cp_sweep, "varlen: N_c values, a list or range (default: --cp)");
  std::string tokens_per_rank;
  app.add_option("--tokens-per-rank", tokens_per_rank,
                 "varlen: c, tokens per rank: s = c N_c for every N_c of the sweep (default: "
                 "s / N_c)");
  app.add_option("--layout", layouts, "varlen: ring layouts, a list")->capture_default_str();
  suite::ring::add_balanced_chunk_flag(app, varlen.balanced_chunk,
                                       " (varlen: as ring_attention takes it)");
  varlen.seed = suite::CommonOptions{}.seed;
  app.add_option("--seed", varlen.seed,
                 "varlen: the seed the documents are drawn with (the benchmarks' --seed)")
      ->capture_default_str();
  app.add_option("--csv", varlen.csv, "varlen: also write the table's rows to this CSV file");
  app.add_option("--seq,-s", p.s, "s: sequence length")->capture_default_str();
  app.add_option("--batch,-b", p.b, "b: micro-batch")->capture_default_str();
  app.add_option("--hidden", p.h, "h: hidden size")->capture_default_str();
  app.add_option("--heads,-a", p.a, "a: query heads")->capture_default_str();
  app.add_option("--kv-heads", p.kv, "n_kv: K/V heads (GQA group g = a/n_kv)")
      ->capture_default_str();
  app.add_option("--tp,-t", p.t, "t: tensor-parallel degree")->capture_default_str();
  app.add_option("--cp", p.n_c, "N_c: context-parallel degree (ring or Ulysses)")
      ->capture_default_str();
  app.add_option("--ulysses-degree,-u", p.u,
                 "u: Ulysses x ring hybrid: Ulysses inside groups of u ranks, ring attention "
                 "across the N_c/u groups (u must divide N_c; 0: u = N_c, plain Ulysses)")
      ->capture_default_str();
  app.add_option("--flops,-F", p.flops,
                 "F: achieved attention FLOP/s (kernel_bench measures it); sp also times the "
                 "layers' GEMMs, forward and backward, at F")
      ->capture_default_str();
  double flops_bwd = 0;
  CLI::Option* flops_bwd_opt =
      app.add_option("--flops-bwd", flops_bwd,
                     "F_b: achieved attention backward FLOP/s, the backward kernel's own rate "
                     "(usually below F): times ring and Ulysses attention backward and sp's "
                     "attention backward; default: the value of --flops");
  app.add_option("--bw,-W", p.bw, "W: achieved link bandwidth in bytes/s (sp_tp busbw measures it)")
      ->capture_default_str();
  app.add_option("--dtype", p.dtype, "element type: bf16, fp32, fp64")
      ->check(CLI::IsMember({"bf16", "fp32", "fp64"}))
      ->capture_default_str();
  app.add_option("--grad-dtype", p.grad_dtype,
                 "e_grad: element type of the dK/dV partial sums that travel around the ring in "
                 "the backward: fp32 (as ring-flash-attention keeps them), bf16 or fp64; the "
                 "other gradients (TP/SP, Ulysses' dO, dQ, dK, dV) travel in --dtype")
      ->capture_default_str();
  app.add_flag("--causal", p.causal,
               "causal attention with a balanced (zig-zag) layout; in --section varlen, causal "
               "within each document (without it: full attention within each document, where "
               "ring_attention and ulysses default to causal)");
  CLI::Option* experts_opt =
      app.add_option("--experts,-E", p.experts, "E: experts (mesh: an MoE block only if given)")
          ->capture_default_str();
  CLI::Option* ep_opt = app.add_option("--ep", p.n_e,
                                       "N_e: expert-parallel degree (mesh: C D "
                                       "unless given)")
                            ->capture_default_str();
  app.add_option("--top-k,-k", p.k, "k: experts per token")->capture_default_str();
  app.add_option("--tokens,-T", p.tokens, "T: tokens per GPU")->capture_default_str();
  app.add_option("--d-ff", p.d_ff, "MLP / expert hidden size (0: 4h)")->capture_default_str();
  app.add_flag("--swiglu", p.swiglu, "SwiGLU experts (6 h d_ff FLOPs per pair)");
  app.add_option("--capacity-factor", p.capacity_factor, "CF: expert capacity factor")
      ->capture_default_str();
  suite::model_cli::MeshOptions mesh;
  app.add_option("--dp", mesh.dp, "mesh: D, the data-parallel degree")->capture_default_str();
  app.add_option("--order", mesh.order,
                 "mesh: axis orders inner to outer, separated by '/' (as the mesh benchmark takes "
                 "them)")
      ->capture_default_str();
  app.add_option("--ranks-per-node", mesh.ranks_per_node,
                 "mesh: consecutive ranks that share a node (its links: --bw, --lat)")
      ->capture_default_str();
  app.add_option("--cp-method", mesh.cp_method, "mesh: ring, allgather, ulysses or hybrid:U")
      ->capture_default_str();
  app.add_option("--bw-inter", mesh.bw_inter, "mesh: bytes/s per rank across nodes (its NIC)")
      ->capture_default_str();
  app.add_option("--lat", mesh.lat, "mesh: seconds per message inside a node")
      ->capture_default_str();
  app.add_option("--lat-inter", mesh.lat_inter, "mesh: seconds per message across nodes")
      ->capture_default_str();
  suite::model_cli::PlanOptions mesh_plan;
  app.add_option("--calibration", mesh_plan.calibration,
                 "plan: rates measured by scripts/calibrate.py (JSON); without it -F, -W, --lat, "
                 "--bw-inter, --lat-inter and --ranks-per-node");
  app.add_option("--gpus", mesh_plan.gpus, "plan: GPUs of the job")->capture_default_str();
  app.add_option("--memory-gb", mesh_plan.memory_gb, "plan: memory per GPU, GB")
      ->capture_default_str();
  app.add_option("--global-tokens", mesh_plan.global_tokens,
                 "plan: tokens per optimizer step (a whole number of --seq sequences; 0: one "
                 "sequence per GPU)")
      ->capture_default_str();
  app.add_option("--max-pp", mesh_plan.max_pp, "plan: the deepest pipeline to consider")
      ->capture_default_str();
  app.add_option("--top", mesh_plan.top, "plan: meshes printed")->capture_default_str();
  app.add_flag("!--no-zero1", mesh_plan.zero1,
               "plan: optimizer state whole on every rank (default: sharded over DP x CP, "
               "ZeRO-1 / Megatron's distributed optimizer)");
  app.add_option("--plan-orders", mesh_plan.orders, "plan: axis orders to consider, '/' between")
      ->capture_default_str();
  app.add_option("--plan-csv", mesh_plan.csv, "plan: every mesh, one CSV row each");
  app.add_option("--compare", mesh_plan.compare,
                 "plan: a mesh to place in the ranking, as the plan names them (e.g. "
                 "tp8-cp16:ring-pp16-dp8)");
  app.add_option("--layers,-L", p.layers,
                 "L: layers of the model; every section also prints totals over L layers")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0 with the help text; a bad flag or value is refused like the benchmarks
    // refuse theirs and like impossible sizes below: one line, exit status 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: model: %s\n", e.what());
    return 2;
  }
  if (flops_bwd_opt->count() > 0) p.flops_bwd = flops_bwd;
  // Sizes that no run could have (METHODS.md's divisibility rules): one message, exit 2.
  if (const std::string why = suite::model_cli::params_error(p, section); !why.empty()) {
    std::fprintf(stderr, "error: model: %s\n", why.c_str());
    return 2;
  }
  double e = static_cast<double>(suite::dtype_size(*suite::parse_dtype(p.dtype)));
  double e_grad = static_cast<double>(suite::dtype_size(*suite::parse_dtype(p.grad_dtype)));
  if (section == "varlen") {
    try {
      for (std::int64_t v :
           cp_sweep.empty() ? std::vector<std::int64_t>{p.n_c} : suite::parse_sweep(cp_sweep)) {
        if (v < 1 || v > (1 << 20))
          throw suite::UsageError("--cp-sweep: N_c " + std::to_string(v) +
                                  " is out of range (1 to 1048576)");
        varlen.cp.push_back(static_cast<int>(v));
      }
      if (varlen.docs.empty()) throw suite::UsageError("--section varlen needs --docs");
      if (!tokens_per_rank.empty()) {
        varlen.tokens_per_rank = suite::parse_scaled_int(tokens_per_rank);
        if (varlen.tokens_per_rank < 1)
          throw suite::UsageError("--tokens-per-rank " + tokens_per_rank + " must be >= 1");
      }
      varlen.layouts = suite::split_list(layouts);
      varlen.s = p.s;
      varlen.u = p.u;
      varlen.causal = p.causal;
      varlen.h = p.h;
      varlen.g = p.a / p.kv;
      varlen.e = e;
      varlen.b = p.b;
      varlen.flops = p.flops;
      varlen.bw = p.bw;
      suite::model_cli::print_varlen(varlen);
    } catch (const suite::UsageError& err) {
      std::fprintf(stderr, "error: model: %s\n", err.what());
      return 2;
    }
    return 0;
  }
  if (section == "tp_overlap") {
    print_tp_overlap(p, e);
    return 0;
  }
  if (section == "plan") {
    if (experts_opt->count() == 0) p.experts = 0;  // a dense model
    mesh_plan.ranks_per_node = mesh.ranks_per_node;
    mesh_plan.bw_inter = mesh.bw_inter;
    mesh_plan.lat = mesh.lat;
    mesh_plan.lat_inter = mesh.lat_inter;
    try {
      suite::model_cli::print_plan(p, mesh_plan, p.dtype, e, e_grad);
    } catch (const suite::UsageError& err) {
      std::fprintf(stderr, "error: model: %s\n", err.what());
      return 2;
    }
    return 0;
  }
  if (section == "mesh") {
    if (experts_opt->count() == 0) p.experts = 0;  // a dense block
    mesh.ep = ep_opt->count() > 0 ? p.n_e : 0;
    try {
      suite::model_cli::print_mesh(p, mesh, e, e_grad);
    } catch (const suite::UsageError& err) {
      std::fprintf(stderr, "error: model: %s\n", err.what());
      return 2;
    }
    return 0;
  }
  if (section == "all" || section == "sp") print_sp(p, e);
  if (section == "all" || section == "ring")
    print_ring(p, e, e_grad, p.flops_bwd.value_or(p.flops));
  if (section == "all" || section == "ulysses") print_ulysses(p, e, e_grad);
  if (section == "all" || section == "moe") print_moe(p, e);
  const auto plan = plan_inputs(p, e, e_grad);
  std::printf("\nPlanning: times at F, F_b and W, totals over L layers\n");
  if (section == "all" || section == "sp") suite::plan::print_sp_plan(plan);
  if (section == "all" || section == "ring") suite::plan::print_ring_plan(plan);
  if (section == "all" || section == "ulysses") suite::plan::print_ulysses_plan(plan);
  if (section == "all" || section == "moe") suite::plan::print_moe_plan(plan);
  return 0;
}

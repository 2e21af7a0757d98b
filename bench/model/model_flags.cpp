#include "bench/model/model_flags.hpp"

#include <CLI/CLI.hpp>

#include "bench/ring_attention/sweep_flags.hpp"
#include "common/formulas/cp_method.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/mesh/mesh_layout.hpp"

namespace suite::model_cli {

void add_model_flags(CLI::App& app, ModelFlags& f) {
  f.varlen.seed = CommonOptions{}.seed;
  app.add_option("--section", f.section,
                 "sp, ring, ulysses, moe or all; varlen (not in all): packed documents (--docs); "
                 "tp_overlap (not in all): TP+SP collectives cut into t ring steps beside their "
                 "GEMMs, each op's threshold on h/t and its serial and overlapped time at F, W; "
                 "mesh (not in all): the composed block on --tp x --cp x --dp ranks in each "
                 "--order, its training step's bytes, memory and time per axis on a two-tier "
                 "cluster (--bw, --lat inside a node; --bw-inter, --lat-inter across); plan (not "
                 "in all): every mesh of --gpus for the model, sequence and --global-tokens, the "
                 "ones that fit --memory-gb, ranked by step time at a --calibration file's rates "
                 "(or the flags'); pipeline (not in all): each --schedule's step and bubble at "
                 "--pp, --microbatches, --chunks from the pipeline benchmark's generator")
      ->check(CLI::IsMember({"all", "sp", "ring", "ulysses", "moe", "varlen", "tp_overlap", "mesh",
                             "plan", "pipeline"}))
      ->capture_default_str();
  pipeline::add_schedule_flags(app, f.schedule);
  f.schedule_opt = app.get_option("--schedule");
  ring::add_docs_flag(app, f.varlen.docs);
  app.add_option("--cp-sweep", f.cp_sweep, "varlen: N_c values, a list or range (default: --cp)");
  app.add_option("--tokens-per-rank", f.tokens_per_rank,
                 "varlen: c, tokens per rank: s = c N_c for every N_c of the sweep (default: "
                 "s / N_c)");
  ring::add_layout_flag(app, f.layouts);
  ring::add_balanced_chunk_flag(app, f.varlen.balanced_chunk);
  add_seed_flag(app, f.varlen.seed);
  app.add_option("--csv", f.varlen.csv, "varlen: also write the table's rows to this CSV file");
  app.add_option("--seq,-s", f.p.s, "s: sequence length")->capture_default_str();
  app.add_option("--batch,-b", f.p.b, "b: micro-batch")->capture_default_str();
  app.add_option("--hidden", f.p.h, "h: hidden size")->capture_default_str();
  app.add_option("--heads,-a", f.p.a, "a: query heads")->capture_default_str();
  app.add_option("--kv-heads", f.p.kv, "n_kv: K/V heads (GQA group g = a/n_kv)")
      ->capture_default_str();
  app.add_option("--tp,-t", f.p.t, "t: tensor-parallel degree")->capture_default_str();
  app.add_option("--cp", f.p.n_c, "N_c: context-parallel degree (ring or Ulysses)")
      ->capture_default_str();
  app.add_option("--ulysses-degree,-u", f.p.u,
                 "u: Ulysses x ring hybrid: Ulysses inside groups of u ranks, ring attention "
                 "across the N_c/u groups (u must divide N_c; 0: u = N_c, plain Ulysses)")
      ->capture_default_str();
  app.add_option("--flops,-F", f.p.flops,
                 "F: achieved attention FLOP/s (kernel_bench measures it); sp also times the "
                 "layers' GEMMs, forward and backward, at F")
      ->capture_default_str();
  f.flops_bwd_opt =
      app.add_option("--flops-bwd", f.flops_bwd,
                     "F_b: achieved attention backward FLOP/s, the backward kernel's own rate "
                     "(usually below F): times ring and Ulysses attention backward and sp's "
                     "attention backward; default: the value of --flops");
  app.add_option("--bw,-W", f.p.bw,
                 "W: achieved link bandwidth in bytes/s (sp_tp busbw measures it)")
      ->capture_default_str();
  app.add_option("--dtype", f.p.dtype, "element type: bf16, fp32, fp64")
      ->check(CLI::IsMember({"bf16", "fp32", "fp64"}))
      ->capture_default_str();
  app.add_option("--grad-dtype", f.p.grad_dtype,
                 "e_grad: element type of the dK/dV partial sums that travel around the ring in "
                 "the backward: fp32 (as ring-flash-attention keeps them), bf16 or fp64; the "
                 "other gradients (TP/SP, Ulysses' dO, dQ, dK, dV) travel in --dtype")
      ->capture_default_str();
  app.add_flag("--causal", f.p.causal,
               "causal attention with a balanced (zig-zag) layout; in --section varlen, causal "
               "within each document (without it: full attention within each document, where "
               "ring_attention and ulysses default to causal)");
  f.experts_opt =
      app.add_option("--experts,-E", f.p.experts, "E: experts (mesh: an MoE block only if given)")
          ->capture_default_str();
  f.ep_opt = app.add_option("--ep", f.p.n_e,
                            "N_e: expert-parallel degree (mesh: C D "
                            "unless given)")
                 ->capture_default_str();
  app.add_option("--top-k,-k", f.p.k, "k: experts per token")->capture_default_str();
  app.add_option("--tokens,-T", f.p.tokens, "T: tokens per GPU")->capture_default_str();
  app.add_option("--d-ff", f.p.d_ff, "MLP / expert hidden size (0: 4h)")->capture_default_str();
  app.add_flag("--swiglu", f.p.swiglu, "SwiGLU experts (6 h d_ff FLOPs per pair)");
  app.add_option("--capacity-factor", f.p.capacity_factor, "CF: expert capacity factor")
      ->capture_default_str();
  app.add_option("--dp", f.mesh.dp, "mesh: D, the data-parallel degree")->capture_default_str();
  add_mesh_order_flag(app, f.mesh.order);
  add_ranks_per_node_flag(app, f.mesh.ranks_per_node);
  add_cp_method_flag(app, f.mesh.cp_method);
  app.add_option("--bw-inter", f.mesh.bw_inter, "mesh: bytes/s per rank across nodes (its NIC)")
      ->capture_default_str();
  app.add_option("--lat", f.mesh.lat, "mesh: seconds per message inside a node")
      ->capture_default_str();
  app.add_option("--lat-inter", f.mesh.lat_inter, "mesh: seconds per message across nodes")
      ->capture_default_str();
  app.add_option("--calibration", f.mesh_plan.calibration,
                 "plan: rates measured by suite calibrate (JSON); without it -F, -W, --lat, "
                 "--bw-inter, --lat-inter and --ranks-per-node");
  app.add_option("--gpus", f.mesh_plan.gpus, "plan: GPUs of the job")->capture_default_str();
  app.add_option("--memory-gb", f.mesh_plan.memory_gb, "plan: memory per GPU, GB")
      ->capture_default_str();
  app.add_option("--global-tokens", f.mesh_plan.global_tokens,
                 "plan: tokens per optimizer step (a whole number of --seq sequences; 0: one "
                 "sequence per GPU)")
      ->capture_default_str();
  app.add_option("--max-pp", f.mesh_plan.max_pp, "plan: the deepest pipeline to consider")
      ->capture_default_str();
  app.add_option("--top", f.mesh_plan.top, "plan: meshes printed")->capture_default_str();
  app.add_flag("!--no-zero1", f.mesh_plan.zero1,
               "plan: optimizer state whole on every rank, as --dp-shard none (default: sharded "
               "over DP x CP, ZeRO-1 / Megatron's distributed optimizer)");
  add_dp_shard_flag(app, f.mesh_plan.dp_shard);
  app.add_option("--recompute", f.mesh_plan.recompute,
                 "plan: activation recomputation: none, selective (LayerNorm and activation "
                 "outputs) or full (each layer's forward again in its backward)")
      ->capture_default_str();
  add_attention_path_flag(app, f.mesh_plan.attention);
  app.add_flag("--ep-overlap", f.mesh_plan.ep_overlap,
               "plan: EP's all-to-alls overlap another micro-batch's compute (DualPipe)");
  app.add_option("--vocab", f.mesh_plan.vocab,
                 "plan: vocabulary: the embedding on the first stage and the output layer on the "
                 "last (0: neither)")
      ->capture_default_str();
  app.add_option("--plan-orders", f.mesh_plan.orders, "plan: axis orders to consider, '/' between")
      ->capture_default_str();
  app.add_option("--plan-csv", f.mesh_plan.csv, "plan: every mesh, one CSV row each");
  app.add_option("--compare", f.mesh_plan.compare,
                 "plan: a mesh to place in the ranking, as the plan names them (e.g. "
                 "tp8-cp16:ring-pp16-dp8)");
  add_layers_flag(app, f.p.layers);
}

}  // namespace suite::model_cli

// sp_tp: Megatron sequence parallelism vs tensor parallelism (METHODS.md section 1).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <sstream>

#include "bench/sp_tp/collectives.hpp"
#include "bench/sp_tp/layer_cases.hpp"
#include "bench/sp_tp/layer_flags.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/bench_main.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/size_list.hpp"
#include "common/sim/sim.hpp"

namespace {

struct SpTpOptions {
  std::string mode = "collectives";
  std::string sizes = "1K:16M:x4";
  std::string ops = "allreduce,rs_ag";
  suite::sp_tp::LayerShapeFlags shape;
  std::string causal = "1";
  bool activation_case = true;
  float dropout = 0.1f;
  std::string variants = "tp,tp_sp";
  std::string attention = "fused";
  suite::kernels::AttnKernelChoice attn_kernel = suite::kernels::AttnKernelChoice::automatic;
  std::string pass = "fwd";
  std::string bwd_overlap = "1";
  std::string tp_overlap = "none";
  int tp = 0;  // TP group size; 0 = all ranks
};

suite::sp_tp::LayerSweep layer_sweep(const SpTpOptions& o) {
  suite::sp_tp::LayerSweep sweep;
  sweep.base.s = o.shape.seq;
  sweep.base.b = o.shape.batch;
  sweep.base.h = o.shape.hidden;
  sweep.base.heads = o.shape.heads;
  sweep.base.d_ff = o.shape.ffn_hidden;
  sweep.base.dropout = o.dropout;
  sweep.causal = suite::parse_causal_list("--causal", o.causal);
  sweep.base.attn_kernel = o.attn_kernel;
  // Each named once, however often listed (as --pass and --bwd-overlap).
  auto add_once = [](auto& list, auto value) {
    if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
  };
  for (const auto& v : suite::split_list(o.variants)) {
    if (v == "tp")
      add_once(sweep.variants, suite::sp_tp::Variant::tp);
    else if (v == "tp_sp")
      add_once(sweep.variants, suite::sp_tp::Variant::tp_sp);
    else
      throw suite::UsageError("--variants: unknown variant '" + v + "' (tp, tp_sp)");
  }
  for (const auto& a : suite::split_list(o.attention)) {
    if (a == "fused")
      add_once(sweep.fused, true);
    else if (a == "unfused")
      add_once(sweep.fused, false);
    else
      throw suite::UsageError("--attention: unknown path '" + a + "' (fused, unfused)");
  }
  if (sweep.variants.empty() || sweep.fused.empty())
    throw suite::UsageError("--variants and --attention name nothing");
  sweep.passes = suite::parse_pass_list("--pass", o.pass);
  sweep.bwd_overlap.clear();
  for (const auto& v : suite::split_list(o.bwd_overlap)) {
    if (v != "1" && v != "0") throw suite::UsageError("--bwd-overlap: '" + v + "' is not 1 or 0");
    add_once(sweep.bwd_overlap, v == "1");
  }
  if (sweep.bwd_overlap.empty()) throw suite::UsageError("--bwd-overlap names nothing (1, 0)");
  if (sweep.bwd_overlap != std::vector<bool>{true} &&
      std::find(sweep.passes.begin(), sweep.passes.end(), suite::Pass::fwd_bwd) ==
          sweep.passes.end())
    throw suite::UsageError("--bwd-overlap " + o.bwd_overlap +
                            ": the overlap is the training step's; add --pass fwd_bwd");
  sweep.tp_overlap = suite::sp_tp::parse_tp_overlap_list(o.tp_overlap);
  using suite::sp_tp::TpOverlap, suite::sp_tp::TpOverlapMode;
  const bool wants_overlap =
      std::any_of(sweep.tp_overlap.begin(), sweep.tp_overlap.end(),
                  [](const TpOverlapMode& m) { return m.kind != TpOverlap::none; });
  if (wants_overlap && std::find(sweep.variants.begin(), sweep.variants.end(),
                                 suite::sp_tp::Variant::tp_sp) == sweep.variants.end())
    throw suite::UsageError("--tp-overlap " + o.tp_overlap +
                            " overlaps TP+SP's all-gathers and reduce-scatters; "
                            "--variants tp has none to overlap: add tp_sp");
  return sweep;
}

std::vector<suite::sp_tp::CollectiveOp> parse_ops(const std::string& text) {
  std::vector<suite::sp_tp::CollectiveOp> ops;
  for (const auto& item : suite::split_list(text)) {
    if (item == "allreduce")
      ops.push_back(suite::sp_tp::CollectiveOp::all_reduce);
    else if (item == "rs_ag")
      ops.push_back(suite::sp_tp::CollectiveOp::rs_ag);
    else
      throw suite::UsageError("--ops: unknown op '" + item + "' (allreduce, rs_ag)");
  }
  return ops;
}

std::vector<suite::CaseSpec> collective_specs(suite::BenchContext& ctx, const SpTpOptions& o) {
  auto ops = parse_ops(o.ops);
  std::vector<suite::sp_tp::CollectiveSize> sizes;
  for (auto n : suite::parse_sweep(o.sizes))
    sizes.push_back({n, "n" + suite::format_scaled_int(n)});
  if (o.activation_case) {
    const auto& [seq, batch, hidden, heads, ffn] = o.shape;
    if (seq <= 0 || batch <= 0 || hidden <= 0)
      throw suite::UsageError("--seq, --batch, --hidden must be >= 1");
    const std::int64_t n =
        seq * batch * hidden * static_cast<std::int64_t>(suite::dtype_size(ctx.dtype));
    sizes.push_back({n,
                     "act_s" + std::to_string(seq) + "_b" + std::to_string(batch) + "_h" +
                         std::to_string(hidden),
                     seq, batch, hidden});
  }
  return suite::sp_tp::collective_cases(ctx, ops, sizes);
}

}  // namespace

int main(int argc, char** argv) {
  SpTpOptions o;
  suite::BenchDefinition def;
  def.name = "sp_tp";
  def.description =
      "Megatron sequence parallelism vs tensor parallelism over TP groups of --tp consecutive "
      "ranks\n"
      "(default: one group of all ranks; with smaller groups all of them run each case at once).\n"
      "collectives mode: one all-reduce (TP) against reduce-scatter + all-gather (SP) of the same "
      "n bytes,\n"
      "for a sweep of sizes and for the activation size s*b*h; time, algbw/busbw, bytes per rank\n"
      "measured vs 2(t-1)/t*n, and an exact correctness check.\n"
      "layer mode: one transformer layer forward as TP and as TP+SP; the gathered SP output is "
      "checked\n"
      "against TP, the activations a backward pass keeps are measured buffer by buffer against\n"
      "sbh(10+24/t) / 34sbh/t (fused attention) or with the 5as/h term (unfused), and the "
      "collective\n"
      "bytes per layer against 4(t-1)/t*sbh*e; step time split into compute and comm.\n"
      "--pass fwd_bwd adds the training step: the backward of the same layer from the ledger "
      "alone\n"
      "(TP: 2 all-reduces; TP+SP: 2 reduce-scatters + 4 all-gathers, the LayerNorm-output ones\n"
      "overlapped with the input-gradient GEMMs unless --bwd-overlap 0, and the LayerNorm weight\n"
      "gradients all-reduced), collectives and bytes per pass against 8(t-1)/t / 10(t-1)/t "
      "sbh*e,\n"
      "the backward's peak memory beside the ledger, TP+SP gradients checked against TP's and, "
      "in fp64,\n"
      "a finite-difference directional derivative of the whole layer.";
  def.add_options = [&](CLI::App& app) {
    app.add_option("--mode", o.mode, "What to measure: collectives, layer, or all")
        ->check(CLI::IsMember({"collectives", "layer", "all"}))
        ->capture_default_str();
    app.add_option("--sizes", o.sizes, "Message sizes in bytes (list or range), e.g. 1K:64M:x2")
        ->capture_default_str();
    app.add_option("--ops", o.ops, "Variants to time: allreduce (TP), rs_ag (SP), comma-separated")
        ->capture_default_str();
    suite::sp_tp::add_layer_shape_flags(app, o.shape, " (activation-sized case and layer)",
                                        " (activation-sized case and layer)");
    app.add_option("--dropout", o.dropout,
                   "layer dropout probability (hidden states and, unfused, attention)")
        ->capture_default_str();
    app.add_option("--variants", o.variants, "layer variants: tp, tp_sp (comma-separated)")
        ->capture_default_str();
    app.add_option("--attention", o.attention,
                   "layer attention paths, comma-separated: fused (flash kernel, scores not "
                   "stored) and/or unfused (stores softmax, its dropout mask and output: the "
                   "5as/h term)")
        ->capture_default_str();
    suite::add_causal_flag(app, o.causal);
    suite::add_attn_kernel_flag(app, o.attn_kernel);
    suite::add_pass_flag(app, o.pass,
                         ". Layer mode; forward cases keep their names, training-step cases end in "
                         "_fwd_bwd");
    suite::sp_tp::add_tp_overlap_flag(app, o.tp_overlap);
    app.add_option("--bwd-overlap", o.bwd_overlap,
                   "layer mode, TP+SP training step: 1 overlaps the backward's LayerNorm-output "
                   "all-gathers with the input-gradient GEMMs (as Megatron does; NCCL: its "
                   "communication stream; MPI: nonblocking, polled between GEMM chunks), 0 runs "
                   "them blocking; '1,0' runs both for comparison (0 adds _nooverlap to the name)")
        ->capture_default_str();
    app.add_option("--tp", o.tp,
                   "t: TP group size, groups of consecutive ranks all running each case at "
                   "once (e.g. 8 = one node of 8 GPUs in a job of 16); 0 = all ranks. Step "
                   "time stays the max over all ranks")
        ->capture_default_str();
    app.add_option("--activation-case", o.activation_case,
                   "1: add a case of n = s*b*h elements (one layer's all-reduce); 0: sweep only")
        ->capture_default_str();
  };
  def.make_cases = [&](suite::BenchContext& ctx) {
    std::vector<suite::CaseSpec> specs;
    // The layer's flags are checked in every mode, so a typo never passes silently.
    const auto sweep = layer_sweep(o);
    if (o.mode == "collectives" && std::find(sweep.passes.begin(), sweep.passes.end(),
                                             suite::Pass::fwd_bwd) != sweep.passes.end())
      throw suite::UsageError(
          "--pass fwd_bwd: the training step is the layer's; add --mode layer (or all)");
    if (o.mode == "collectives" && sweep.tp_overlap != std::vector{suite::sp_tp::TpOverlapMode{}})
      throw suite::UsageError(
          "--tp-overlap: the overlap is the layer's GEMMs'; add --mode layer (or all)");
    if (o.mode != "layer") specs = collective_specs(ctx, o);
    if (o.mode != "collectives") {
      auto layer = suite::sp_tp::layer_cases(ctx, sweep);
      specs.insert(specs.end(), layer.begin(), layer.end());
    }
    return specs;
  };
  def.mesh = [&](int world) { return suite::axis_mesh(suite::MeshAxis::tp, o.tp, world, "--tp"); };
  def.summarize = [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
    suite::sp_tp::print_collective_table(records);
    suite::sp_tp::print_layer_table(records);
  };
  return suite::run_benchmark(argc, argv, def);
}

#include "bench/sp_tp/sp_tp_flags.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "bench/sp_tp/collectives.hpp"
#include "bench/sp_tp/layer_cases.hpp"
#include "common/device/attention_select.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/pass_list.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::sp_tp {
namespace {

LayerSweep layer_sweep(const SpTpFlags& o) {
  LayerSweep sweep;
  sweep.base.s = o.shape.seq;
  sweep.base.b = o.shape.batch;
  sweep.base.h = o.shape.hidden;
  sweep.base.heads = o.shape.heads;
  sweep.base.d_ff = o.shape.ffn_hidden;
  sweep.base.dropout = o.dropout;
  sweep.causal = parse_list("--causal", o.causal, parse_causal);
  sweep.base.attn_kernel = o.attn_kernel;
  sweep.variants = parse_list(
      "--variants", o.variants,
      named<Variant>("--variants", "variant", {{"tp", Variant::tp}, {"tp_sp", Variant::tp_sp}}));
  sweep.fused = parse_list("--attention", o.attention, parse_attention_path);
  sweep.passes = parse_list("--pass", o.pass, parse_pass);
  sweep.bwd_overlap =
      parse_list("--bwd-overlap", o.bwd_overlap,
                 named<bool>("--bwd-overlap", "value", {{"1", true}, {"0", false}}));
  if (sweep.bwd_overlap != std::vector<bool>{true} &&
      std::find(sweep.passes.begin(), sweep.passes.end(), Pass::fwd_bwd) == sweep.passes.end())
    throw UsageError("--bwd-overlap " + o.bwd_overlap +
                     ": the overlap is the training step's; add --pass fwd_bwd");
  sweep.tp_overlap = parse_list("--tp-overlap", o.tp_overlap, parse_tp_overlap);
  const bool wants_overlap =
      std::any_of(sweep.tp_overlap.begin(), sweep.tp_overlap.end(),
                  [](const TpOverlapMode& m) { return m.kind != TpOverlap::none; });
  if (wants_overlap && std::find(sweep.variants.begin(), sweep.variants.end(), Variant::tp_sp) ==
                           sweep.variants.end())
    throw UsageError("--tp-overlap " + o.tp_overlap +
                     " overlaps TP+SP's all-gathers and reduce-scatters; "
                     "--variants tp has none to overlap: add tp_sp");
  return sweep;
}

std::vector<CaseSpec> collective_specs(BenchContext& ctx, const SpTpFlags& o) {
  const auto ops = parse_list("--ops", o.ops,
                              named<CollectiveOp>("--ops", "op",
                                                  {{"allreduce", CollectiveOp::all_reduce},
                                                   {"rs_ag", CollectiveOp::rs_ag}}));
  std::vector<CollectiveSize> sizes;
  for (auto n : parse_sweep(o.sizes))
    sizes.push_back({n, "n" + format_scaled_int(n)});
  if (o.activation_case) {
    const auto& [seq, batch, hidden, heads, ffn] = o.shape;
    if (seq <= 0 || batch <= 0 || hidden <= 0)
      throw UsageError("--seq, --batch, --hidden must be >= 1");
    const std::int64_t n = seq * batch * hidden * static_cast<std::int64_t>(dtype_size(ctx.dtype));
    sizes.push_back({n,
                     "act_s" + std::to_string(seq) + "_b" + std::to_string(batch) + "_h" +
                         std::to_string(hidden),
                     seq, batch, hidden});
  }
  return collective_cases(ctx, ops, sizes);
}

}  // namespace

void add_sp_tp_flags(CLI::App& app, SpTpFlags& o) {
  app.add_option("--mode", o.mode, "What to measure: collectives, layer, or all")
      ->check(CLI::IsMember({"collectives", "layer", "all"}))
      ->capture_default_str();
  add_sizes_flag(app, o.sizes);
  app.add_option("--ops", o.ops, "Variants to time: allreduce (TP), rs_ag (SP), comma-separated")
      ->capture_default_str();
  add_layer_shape_flags(app, o.shape);
  app.add_option("--dropout", o.dropout,
                 "layer dropout probability (hidden states and, unfused, attention)")
      ->capture_default_str();
  app.add_option("--variants", o.variants, "layer variants: tp, tp_sp (comma-separated)")
      ->capture_default_str();
  add_attention_path_flag(app, o.attention);
  add_causal_flag(app, o.causal);
  add_attn_kernel_flag(app, o.attn_kernel);
  add_pass_flag(app, o.pass);
  add_tp_overlap_flag(app, o.tp_overlap);
  app.add_option("--bwd-overlap", o.bwd_overlap,
                 "layer mode, TP+SP training step: 1 overlaps the backward's LayerNorm-output "
                 "all-gathers with the input-gradient GEMMs (as Megatron does; NCCL: its "
                 "communication stream; MPI: nonblocking, polled between GEMM chunks), 0 runs "
                 "them blocking; '1,0' runs both for comparison (0 adds _nooverlap to the name)")
      ->capture_default_str();
  app.add_option("--tp", o.tp,
                 "t: TP group size, groups of consecutive ranks (or as --order lays them out) all "
                 "running each case at "
                 "once (e.g. 8 = one node of 8 GPUs in a job of 16); 0 = all ranks. Step "
                 "time stays the max over all ranks")
      ->capture_default_str();
  app.add_option("--activation-case", o.activation_case,
                 "1: add a case of n = s*b*h elements (one layer's all-reduce); 0: sweep only")
      ->capture_default_str();
}

std::vector<CaseSpec> sp_tp_flag_cases(BenchContext& ctx, const SpTpFlags& o) {
  std::vector<CaseSpec> specs;
  // The layer's flags are checked in every mode, so a typo never passes silently.
  const auto sweep = layer_sweep(o);
  if (o.mode == "collectives" &&
      std::find(sweep.passes.begin(), sweep.passes.end(), Pass::fwd_bwd) != sweep.passes.end())
    throw UsageError("--pass fwd_bwd: the training step is the layer's; add --mode layer (or all)");
  if (o.mode == "collectives" && sweep.tp_overlap != std::vector{TpOverlapMode{}})
    throw UsageError("--tp-overlap: the overlap is the layer's GEMMs'; add --mode layer (or all)");
  if (o.mode != "layer") specs = collective_specs(ctx, o);
  if (o.mode != "collectives") {
    auto layer = layer_cases(ctx, sweep);
    specs.insert(specs.end(), layer.begin(), layer.end());
  }
  return specs;
}

}  // namespace suite::sp_tp

// sp_tp: Megatron sequence parallelism vs tensor parallelism (METHODS.md section 1).
#include <CLI/CLI.hpp>

#include "bench/sp_tp/collectives.hpp"
#include "bench/sp_tp/layer_cases.hpp"
#include "bench/sp_tp/sp_tp_flags.hpp"
#include "common/harness/bench_main.hpp"

namespace {

const char* const kDescription =
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

}  // namespace

int main(int argc, char** argv) {
  suite::sp_tp::SpTpFlags o;
  return suite::run_benchmark(
      argc, argv,
      {.name = "sp_tp",
       .description = kDescription,
       .add_options = [&](CLI::App& app) { suite::sp_tp::add_sp_tp_flags(app, o); },
       .make_cases =
           [&](suite::BenchContext& ctx) { return suite::sp_tp::sp_tp_flag_cases(ctx, o); },
       .summarize =
           [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
             suite::sp_tp::print_collective_table(records);
             suite::sp_tp::print_layer_table(records);
           },
       .mesh =
           [&](int world) { return suite::axis_mesh(suite::MeshAxis::tp, o.tp, world, "--tp"); }});
}

// moe: MoE expert parallelism (METHODS.md sections 4 and 5): a router with controllable skew,
// capacity and drops, dispatch/combine all-to-alls, grouped expert GEMMs; forward, or forward
// and backward (--pass).
#include <CLI/CLI.hpp>

#include "bench/moe/a2a_case.hpp"
#include "bench/moe/moe_flags.hpp"
#include "bench/moe/moe_report.hpp"
#include "common/harness/bench_main.hpp"
#include "common/results/record_access.hpp"

namespace {

const char* const kDescription =
    "MoE expert parallelism (METHODS.md sections 4, 5): one MoE layer per case and pass on "
    "groups of\n"
    "N_e consecutive ranks (--ep), each holding E/N_e experts and T tokens: route (router GEMM,\n"
    "softmax, top-k, renormalised gates, optional skew and capacity with deterministic drops:\n"
    "lowest gate dropped first, ties by global token index), permute, dispatch (counts, then\n"
    "all-to-all-v), expert MLPs (one GEMM per expert and matrix), combine (reverse "
    "all-to-all-v,\n"
    "gate-weighted sum). Per case: per-phase times, per-expert and per-rank loads, drops, aux\n"
    "loss, bytes per rank counted by the transport = what the routing implies, beside\n"
    "2kThe(N_e-1)/N_e, and the all-to-all / expert time ratio beside (F/W)((N_e-1)/N_e)/d_ff.\n"
    "The output is checked against a host reference of the same layer (same routing and drops).\n"
    "--pass fwd_bwd adds the backward of the same step (METHODS.md section 5) for the loss\n"
    "<dY, out> + alpha E sum f_i P_i (dY seeded, alpha = 1e-2, f_i held constant): output\n"
    "gradients to the experts with the dispatch counts, per-expert input and weight gradients\n"
    "(four GEMMs per expert, 2x the forward FLOPs), input gradients home with the combine\n"
    "counts, the gates' and router's gradients; dropped copies carry no gradient. Bytes of\n"
    "both passes = what the routing implies, beside 4kThe(N_e-1)/N_e; gradients (input, expert\n"
    "weights, router weight, gates) checked against a host double reference.\n"
    "--save-tensors writes chosen experts, gates, kept flags, per-expert counts, input and\n"
    "output per rank when T*h and T*k are at most 1M elements (fwd_bwd: also dY, the\n"
    "gradients of the input, gates, router weight and local experts' weights).\n"
    "Modeled compute (SMPI build, --sim-flops) holds no tensor values: the router's logits are\n"
    "drawn per (seed, global token, expert) instead of computed from x (results attribute\n"
    "router_logits), then routed, skewed, balanced and dropped as above; a capacity factor's\n"
    "drops are settled before timing by each expert's owner. Bytes, loads and drops are exact\n"
    "for that routing; --save-tensors writes the routing only.";

}  // namespace

int main(int argc, char** argv) {
  suite::moe::MoeFlags o;
  return suite::run_benchmark(
      argc, argv,
      {.name = "moe",
       .description = kDescription,
       .add_options = [&](CLI::App& app) { suite::moe::add_moe_flags(app, o); },
       .make_cases = [&](suite::BenchContext& ctx) { return suite::moe::moe_flag_cases(ctx, o); },
       .summarize =
           [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
             std::vector<suite::CaseRecord> layer, a2a;
             for (const auto& r : records)
               (suite::param_text(r, "mode") == "a2a" ? a2a : layer).push_back(r);
             suite::moe::print_moe_table(layer);
             suite::moe::print_a2a_table(a2a);
           },
       .mesh =
           [&](int world) { return suite::axis_mesh(suite::MeshAxis::ep, o.ep, world, "--ep"); }});
}

// mesh: the axes together (METHODS.md section 6): one transformer block over a TP x CP x EP x DP
// device mesh, forward and training step with its gradient sums, each axis's bytes and time.
#include <CLI/CLI.hpp>

#include "bench/mesh/mesh_case.hpp"
#include "bench/mesh/mesh_config.hpp"
#include "bench/mesh/mesh_flags.hpp"
#include "bench/mesh/mesh_table.hpp"
#include "common/harness/bench_main.hpp"

namespace {

const char* const kDescription =
    "The composed block: one pre-LN transformer block (sp_tp's TP+SP layer: LayerNorm, QKV,\n"
    "attention, output projection, residual, LayerNorm, MLP or with --experts the MoE layer of\n"
    "moe, residual) over a device mesh of --tp x --cp x --dp ranks (the job's), laid out by\n"
    "--order (inner to outer: the first axis varies fastest, so it lands inside a node).\n"
    "Attention runs over the CP group with ring_attention's or ulysses' own code (--cp-method),\n"
    "the MoE over expert groups of --ep ranks of one TP index; each part takes its axis's\n"
    "communicator from one mesh object. The training step (--pass fwd_bwd) ends with the\n"
    "gradient sums: dense weights over DP x CP, the router's over TP first (its gradient is a\n"
    "partial sum over the sequence shards, as the LayerNorms' are, which the layer sums), each\n"
    "expert's over its T C D / E copies. Per case: time and exposed time per axis, bytes per\n"
    "rank per axis counted by the transport beside METHODS.md section 6, the activation ledger\n"
    "and weights beside their formulas, and the output, input gradient and every summed weight\n"
    "gradient checked against the single-rank block on the same global batch (D b sequences).\n"
    "The block has no dropout (as Llama 3 and DeepSeek-V3 train) and its MoE no auxiliary loss\n"
    "and no capacity (dropless): both would depend on which ranks hold which tokens.";

}  // namespace

int main(int argc, char** argv) {
  suite::mesh::MeshFlags flags;
  return suite::run_benchmark(
      argc, argv,
      {.name = "mesh",
       .description = kDescription,
       .add_options = [&](CLI::App& app) { suite::mesh::add_mesh_flags(app, flags); },
       .make_cases =
           suite::case_per_config(flags, suite::mesh::mesh_configs, suite::mesh::make_case),
       .summarize =
           [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
             suite::mesh::print_mesh_table(records);
           }});
}

// mesh: the axes together (METHODS.md section 6): one transformer block over a TP x CP x EP x DP
// device mesh, forward and training step with its gradient sums, each axis's bytes and time.
#include <CLI/CLI.hpp>

#include "bench/mesh/mesh_case.hpp"
#include "bench/mesh/mesh_config.hpp"
#include "bench/mesh/mesh_flags.hpp"
#include "bench/mesh/mesh_table.hpp"
#include "bench/pipeline/pipeline_case.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "common/harness/bench_main.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/results/record_access.hpp"

namespace {

using suite::BenchContext;
using suite::CaseSpec;

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
    "and no capacity (dropless): both would depend on which ranks hold which tokens.\n"
    "--pp (a list, each value its cases) P > 1: the block's --layers layers over P pipeline\n"
    "stages of T x C ranks, D = the job's ranks / (T C P) replicas, run and checked as pipeline\n"
    "--stage block runs them (--schedule, --microbatches, --chunks; a training step, gradients\n"
    "summed over DP; dense, ring CP, fp64), laid out by --order with pp's place (tp,cp,ep,dp,pp\n"
    "or tp,cp,pp,dp).";

// The flags beyond mesh's own: the pipeline's --pp (P, a list here; 1: no pipeline), schedule
// and --layers.
struct Flags {
  suite::mesh::MeshFlags mesh;
  suite::pipeline::ScheduleFlags schedule{.pp = "1"};
  int layers = 0;
};

// Per value of --pp: the block's case where P = 1, the pipeline's block-stage cases (one per
// schedule) where P > 1.
std::vector<CaseSpec> make_cases(const Flags& f, BenchContext& ctx) {
  suite::mesh::MeshFlags mesh = f.mesh;
  mesh.pp = f.schedule.pp;
  std::vector<CaseSpec> specs;
  for (const suite::mesh::MeshConfig& c : suite::mesh::mesh_configs(mesh, ctx)) {
    if (c.shape.pp == 1) {
      specs.push_back(suite::mesh::make_case(ctx, c));
      continue;
    }
    for (const auto& p : suite::pipeline::block_stage_configs(c, f.schedule, f.layers, ctx)) {
      CaseSpec spec = suite::pipeline::make_case(ctx, p);
      // The mesh's name (its degrees and order tell the cases of a sweep apart), the schedule's.
      spec.name = c.case_name() + "_" + suite::pipeline::schedule_name(p.spec.kind) + "_m" +
                  std::to_string(p.spec.microbatches) + "_v" + std::to_string(p.spec.chunks) +
                  "_L" + std::to_string(p.layers);
      specs.push_back(std::move(spec));
    }
  }
  return specs;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  return suite::run_benchmark(
      argc, argv,
      {.name = "mesh",
       .description = kDescription,
       .add_options =
           [&](CLI::App& app) {
             suite::mesh::add_mesh_flags(app, flags.mesh);
             suite::pipeline::add_schedule_flags(app, flags.schedule);
             suite::add_layers_flag(app, flags.layers);
           },
       .make_cases = [&](BenchContext& ctx) { return make_cases(flags, ctx); },
       .summarize =
           [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
             // The pipeline cases (P > 1) report the pipeline's own figures, not the table's.
             std::vector<suite::CaseRecord> blocks;
             for (const suite::CaseRecord& r : records)
               if (suite::param_text(r, "stage").empty()) blocks.push_back(r);
             suite::mesh::print_mesh_table(blocks);
           }});
}

// pipeline: the fourth axis (METHODS.md section 7): pipeline parallelism with its schedules run,
// each op's start and end on each rank, the bubble beside the schedule's critical path.
#include <CLI/CLI.hpp>

#include "bench/pipeline/pipeline_case.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "common/harness/bench_main.hpp"

namespace {

const char* const kDescription =
    "Pipeline parallelism: the model's --layers dense residual MLP blocks (y = x + tanh(x W1)\n"
    "W2, fp64) split over p = --pp stages of one rank each (v = --chunks chunks per rank for\n"
    "the interleaved and V-shaped schedules), --microbatches micro-batches of --batch sequences\n"
    "of --seq tokens per step. Each --schedule (gpipe, 1f1b, interleaved, zb-h1, zb-v) comes\n"
    "from one generator (common/formulas/pipeline_schedule.hpp) and one executor runs it:\n"
    "activations forward and their gradients backward point to point, nonblocking. Per case:\n"
    "each op's start and end on each rank (the timeline table), the bubble beside the critical\n"
    "path of the schedule's graph with the F, B, W and hop times measured in the same step\n"
    "(pred_bubble_s) and METHODS.md 7's closed form (pred_closed_bubble_s), bytes per hop "
    "beside\n"
    "c b_mb h e, peak activations per rank beside the schedule's in-flight count; the loss,\n"
    "input gradients and every weight gradient checked against one rank running all layers.\n"
    "Ranks beyond --pp run further PP groups, laid out with the PP groups by --order (pp\n"
    "unnamed: outermost, as in Megatron's tp,cp,ep,dp,pp; the seed's tp,cp,pp,dp puts a PP\n"
    "group on consecutive ranks); world rank 0's group is recorded. They are the DP axis: each\n"
    "runs its own micro-batches, and each stage's weight gradients are summed over DP after its\n"
    "last W (the block's after its CP sum) under --dp-shard (none, optimizer, grads, full), then\n"
    "a plain SGD step (w -= 0.1 g; every step starts from the initial weights); bytes per\n"
    "collective beside dp_shard_cost's, and the summed gradients and updated parameters checked\n"
    "against one rank running every replica's micro-batches.\n"
    "--stage block: each stage holds L/p layers of mesh's transformer block instead, TP+SP over\n"
    "--tp and ring attention over --cp inside the stage, hops carrying this rank's shard.\n"
    "Backends: cpu runs both stages in fp64, the hops MPI messages of fp64 host rows. cuda runs\n"
    "--stage block only, in fp32 (one PP group: no DP sums), its hops ncclSend/ncclRecv of fp32\n"
    "device copies under the default --transport (one communicator and stream per stage\n"
    "boundary and direction; one GPU per rank), or with --transport mpi the host MPI messages\n"
    "above (ranks may share a GPU). The results' hop_transport and hop_detail say which.";

}  // namespace

int main(int argc, char** argv) {
  suite::pipeline::PipelineFlags flags;
  return suite::run_benchmark(
      argc, argv,
      {.name = "pipeline",
       .description = kDescription,
       .cpu_dtypes = {suite::DType::fp64},
       .cuda_dtypes = {suite::DType::fp32},
       .add_options = [&](CLI::App& app) { suite::pipeline::add_pipeline_flags(app, flags); },
       .make_cases = suite::case_per_config(flags, suite::pipeline::pipeline_configs,
                                            suite::pipeline::make_case),
       .axis_order = true});
}

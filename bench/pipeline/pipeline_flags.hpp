// The pipeline benchmark's flags (pipeline_flags) and the cases they name: one per schedule of
// --schedule, each validated (UsageError naming the flag and the numbers otherwise).
#pragma once

#include <string>
#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "bench/sp_tp/layer_flags.hpp"
#include "common/formulas/dp_shard.hpp"
#include "common/formulas/pipeline_schedule.hpp"
#include "common/harness/context.hpp"
#include "common/mesh/mesh_layout.hpp"

namespace suite::pipeline {

// The schedule's flags, shared with model's pipeline section and mesh.
struct ScheduleFlags {
  // --pp as given: one p for pipeline and model's section (one_pp; 0: the job's ranks), a list
  // of P for mesh (its sweep; 1: no pipeline).
  std::string pp = "0";
  std::string schedules = "1f1b";
  int microbatches = 0;  // 0: 2 p
  int chunks = 0;        // 0: the schedule's own (default_chunks)
};

// Also mesh's (its --pp, default 1, and the schedule of its P > 1 cases).
void add_schedule_flags(CLI::App& app, ScheduleFlags& f);

// pipeline's and model's p: --pp's one whole number (UsageError naming the flag otherwise).
int one_pp(const ScheduleFlags& f);

// Every schedule --schedule names at p ranks, validated (UsageError naming the flag otherwise).
std::vector<ScheduleSpec> schedule_specs(const ScheduleFlags& f, int p);

// What a stage's layers are: the toy residual MLP (mlp) or mesh's composed block (block).
enum class StageKind { mlp, block };
// "mlp" -> mlp; UsageError naming --stage otherwise.
StageKind parse_stage(const std::string& name);
// UsageError naming --stage and --backend where mlp (host fp64 by design) meets a device.
void refuse_host_stage_on_device(StageKind stage, Backend backend);

struct PipelineFlags {
  ScheduleFlags schedule;
  int layers = 0;  // 0: 2 p v
  sp_tp::LayerShapeFlags shape{64, 1, 64, 1, 0};
  std::string stage = "mlp";
  std::string tp = "1", cp = "1";  // the block's, inside each stage
  std::string dp_shard = "none";   // the DP gradient sums' modes (list)
};

void add_pipeline_flags(CLI::App& app, PipelineFlags& f);

// One case's sizes, resolved.
struct PipelineConfig {
  ScheduleSpec spec;
  int layers = 1;
  std::int64_t seq = 1, batch = 1, hidden = 1, ffn = 4;
  StageKind stage = StageKind::mlp;
  std::int64_t heads = 1;
  std::uint64_t seed = 1234;
  int replicas = 1;  // PP groups in the job: the job's ranks / (p T C)
  MeshShape mesh;    // pp = p, tp = T, cp = C, the other ranks data-parallel, laid out by --order
  model::DpShard dp_shard = model::DpShard::none;
  DType dtype = DType::fp64;        // the block's: fp64 on the CPU, fp32 on CUDA (mesh's too)
  Transport hops = Transport::mpi;  // what carries the hops: the harness's transport
  // Whether the replicas sum their gradients (more than one PP group).
  bool dp_sums() const { return replicas > 1; }
  std::string name() const;
};

std::vector<PipelineConfig> pipeline_configs(const PipelineFlags& f, const BenchContext& ctx);
// mesh's block over P = block.shape.pp > 1 stages as the block-stage cases, one per --schedule
// of `schedule`, of `layers` layers (0: 2 p v), laid out by the block's order.
std::vector<PipelineConfig> block_stage_configs(const mesh::MeshConfig& block,
                                                const ScheduleFlags& schedule, int layers,
                                                const BenchContext& ctx);
}  // namespace suite::pipeline

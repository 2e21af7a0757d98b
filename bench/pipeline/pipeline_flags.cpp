#include "bench/pipeline/pipeline_flags.hpp"

#include <CLI/CLI.hpp>

#include "bench/mesh/mesh_flags.hpp"
#include "bench/pipeline/block_chunk.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::pipeline {

void add_schedule_flags(CLI::App& app, ScheduleFlags& f) {
  app.add_option("--pp", f.pp,
                 "p: pipeline stages, of one rank each (--stage block and mesh: of T C ranks); 0 = "
                 "the job's ranks (/ T C), which it must divide; the other ranks run further PP "
                 "groups, data-parallel, laid out by --order (pp unnamed: outermost). mesh: a "
                 "list, each value its own cases: 1 = no pipeline, above 1 the block as pipeline's "
                 "block-stage case")
      ->capture_default_str();
  std::string known;
  for (const std::string& n : schedule_names())
    known += (known.empty() ? "" : ", ") + n;
  app.add_option("--schedule", f.schedules, "schedules (list): " + known)->capture_default_str();
  app.add_option("--microbatches", f.microbatches, "m: micro-batches per step; 0 = 2 p")
      ->capture_default_str();
  app.add_option("--chunks", f.chunks,
                 "v: model chunks per rank (interleaved: 2 or more, zb-v: 2, the others 1); 0 = "
                 "the schedule's own")
      ->capture_default_str();
}

int one_pp(const ScheduleFlags& f) {
  std::size_t used = 0;
  int p = 0;
  try {
    p = std::stoi(f.pp, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (f.pp.empty() || used != f.pp.size())
    throw UsageError("--pp " + f.pp + ": one whole number here (mesh sweeps a list)");
  return p;
}

std::vector<ScheduleSpec> schedule_specs(const ScheduleFlags& f, int p) {
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  if (f.microbatches < 0 || f.chunks < 0)
    throw UsageError("--microbatches " + n(f.microbatches) + ", --chunks " + n(f.chunks) +
                     ": must be >= 0 (0 = the default)");
  std::vector<ScheduleSpec> specs;
  for (ScheduleKind kind : parse_list("--schedule", f.schedules, parse_schedule)) {
    ScheduleSpec spec;
    spec.kind = kind;
    spec.ranks = p;
    spec.microbatches = f.microbatches == 0 ? 2 * p : f.microbatches;
    spec.chunks = f.chunks == 0 ? default_chunks(spec.kind) : f.chunks;
    if (const std::string bad = check_schedule(spec); !bad.empty()) throw UsageError(bad);
    specs.push_back(spec);
  }
  return specs;
}

void add_pipeline_flags(CLI::App& app, PipelineFlags& f) {
  add_schedule_flags(app, f.schedule);
  add_layers_flag(app, f.layers);
  sp_tp::add_layer_shape_flags(app, f.shape);
  app.add_option(
         "--stage", f.stage,
         "a stage's layers: mlp (the residual MLP blocks, host fp64: --backend cpu only) or "
         "block (mesh's transformer block, TP+SP over --tp and attention over --cp inside "
         "the stage; its backward runs whole, so zb-h1 and zb-v run their order with B and "
         "W fused into one BW)")
      ->capture_default_str();
  mesh::add_tp_cp_flags(app, f.tp, f.cp);
  add_dp_shard_flag(app, f.dp_shard);
  // An explicit --backend cuda is refused with --stage mlp as the flags are read, before any GPU
  // is looked for; --backend auto, once resolved, in pipeline_configs.
  app.callback([&app, &f] {
    const CLI::Option* backend = app.get_option_no_throw("--backend");
    if (backend && backend->count() > 0 && backend->results().back() == "cuda")
      refuse_host_stage_on_device(parse_stage(f.stage), Backend::cuda);
  });
}

std::string PipelineConfig::name() const {
  const std::string block = stage == StageKind::block ? "_block_t" + std::to_string(mesh.tp) +
                                                            "_c" + std::to_string(mesh.cp)
                                                      : "";
  return std::string(schedule_name(spec.kind)) + block + "_p" + std::to_string(spec.ranks) + "_m" +
         std::to_string(spec.microbatches) + "_v" + std::to_string(spec.chunks) + "_L" +
         std::to_string(layers) + "_s" + std::to_string(seq) + "_b" + std::to_string(batch) + "_h" +
         std::to_string(hidden) +
         (dp_shard == model::DpShard::none ? ""
                                           : "_ds" + std::string(model::dp_shard_name(dp_shard)));
}

StageKind parse_stage(const std::string& name) {
  if (name == "mlp") return StageKind::mlp;
  if (name == "block") return StageKind::block;
  throw UsageError("--stage " + name + ": mlp or block");
}

void refuse_host_stage_on_device(StageKind stage, Backend backend) {
  if (stage == StageKind::mlp && backend != Backend::cpu)
    throw UsageError("--stage mlp runs its layers on the host in fp64: --backend " +
                     std::string(backend_name(backend)) + " takes --stage block");
}

namespace {

// The cases of one T x C = stage_ranks: the job's ranks / (T C) left for p and the replicas.
std::vector<PipelineConfig> stage_configs(const PipelineFlags& f, const BenchContext& ctx,
                                          int stage_ranks) {
  const int world = ctx.mpi.size() / stage_ranks, pp = one_pp(f.schedule);
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  if (pp < 0 || (pp > 0 && world % pp != 0))
    throw UsageError("--pp " + n(pp) + " must divide the job's " + n(ctx.mpi.size()) + " ranks" +
                     (stage_ranks > 1 ? " / (--tp x --cp = " + n(stage_ranks) + ")" : ""));
  if (f.shape.seq < 1 || f.shape.batch < 1 || f.shape.hidden < 1 || f.shape.ffn_hidden < 0)
    throw UsageError("--seq " + n(f.shape.seq) + ", --batch " + n(f.shape.batch) + ", --hidden " +
                     n(f.shape.hidden) + ": must be >= 1");
  if (f.layers < 0) throw UsageError("--layers " + n(f.layers) + ": must be >= 0 (0 = 2 p v)");
  std::vector<PipelineConfig> configs;
  for (const ScheduleSpec& spec : schedule_specs(f.schedule, pp == 0 ? world : pp)) {
    PipelineConfig c;
    c.spec = spec;
    const int stages = spec.ranks * spec.chunks;
    // A message's tag names its stage and micro-batch; MPI guarantees tags up to 32767.
    if (2LL * stages * spec.microbatches + Comm::kPeerTagBase > 32767)
      throw UsageError("--pp " + n(spec.ranks) + " x --chunks " + n(spec.chunks) +
                       " x --microbatches " + n(spec.microbatches) +
                       " is above the 15883 stage micro-batches this run's MPI tags can name");
    c.layers = f.layers == 0 ? 2 * stages : f.layers;
    if (c.layers < stages)
      throw UsageError("--layers " + n(c.layers) + " is fewer than the " + n(stages) +
                       " stages (--pp " + n(spec.ranks) + " x --chunks " + n(spec.chunks) + ")");
    c.seq = f.shape.seq;
    c.batch = f.shape.batch;
    c.hidden = f.shape.hidden;
    c.ffn = f.shape.ffn_hidden == 0 ? 4 * f.shape.hidden : f.shape.ffn_hidden;
    c.heads = f.shape.heads;
    c.seed = ctx.opts.seed;
    c.replicas = world / spec.ranks;
    // The DP sums step host fp64 weights (dp_sums.hpp): one PP group on a device.
    if (ctx.backend != Backend::cpu && c.replicas > 1)
      throw UsageError("--backend " + std::string(backend_name(ctx.backend)) +
                       ": pipeline runs one PP group there (no DP sums), but the job's " +
                       n(ctx.mpi.size()) + " ranks hold " + n(c.replicas) + " (--pp " +
                       n(spec.ranks) + " x --tp x --cp = " + n(spec.ranks * stage_ranks) + ")");
    c.dtype = ctx.backend == Backend::cpu ? DType::fp64 : DType::fp32;
    c.hops = ctx.comm.transport();
    c.mesh.pp = spec.ranks;
    c.mesh.dp = c.replicas;
    c.mesh.set_order(one_mesh_order_pp(ctx.opts.order, "pipeline"));
    configs.push_back(c);
  }
  return configs;
}

}  // namespace

std::vector<PipelineConfig> pipeline_configs(const PipelineFlags& f, const BenchContext& ctx) {
  const int world = ctx.mpi.size();
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  const StageKind stage = parse_stage(f.stage);
  refuse_host_stage_on_device(stage, ctx.backend);
  const auto modes = parse_list("--dp-shard", f.dp_shard, model::parse_dp_shard);
  std::vector<PipelineConfig> configs;
  for (int tp : mesh::degrees("--tp", f.tp))
    for (int cp : mesh::degrees("--cp", f.cp)) {
      if (tp < 1 || cp < 1 || world % (tp * cp) != 0)
        throw UsageError("--tp " + n(tp) + " x --cp " + n(cp) + " must divide the job's " +
                         n(world) + " ranks");
      if (stage == StageKind::mlp && tp * cp > 1)
        throw UsageError("--tp " + n(tp) + ", --cp " + n(cp) + ": --stage mlp has no TP or CP");
      for (PipelineConfig c : stage_configs(f, ctx, tp * cp)) {
        c.stage = stage;
        c.mesh.tp = tp, c.mesh.cp = cp;
        // The block's sizes on a stage's T x C ranks, as mesh validates them.
        if (stage == StageKind::block) mesh::validate(block_config(c), tp * cp);
        for (model::DpShard mode : modes) {
          if (mode != model::DpShard::none && c.replicas == 1)
            throw UsageError("--dp-shard " + std::string(model::dp_shard_name(mode)) +
                             ": the job's " + n(world) + " ranks hold one PP group (--pp " +
                             n(c.spec.ranks) + " x --tp x --cp = " + n(c.spec.ranks * tp * cp) +
                             "): no replicas to shard over");
          c.dp_shard = mode;
          configs.push_back(c);
        }
      }
    }
  return configs;
}

std::vector<PipelineConfig> block_stage_configs(const mesh::MeshConfig& block,
                                                const ScheduleFlags& schedule, int layers,
                                                const BenchContext& ctx) {
  PipelineFlags f;
  f.schedule = schedule;
  f.schedule.pp = std::to_string(block.shape.pp);
  f.layers = layers;
  f.shape = {block.s, block.b, block.h, block.heads, block.d_ff};
  f.stage = "block";
  f.tp = std::to_string(block.shape.tp);
  f.cp = std::to_string(block.shape.cp);
  std::vector<PipelineConfig> configs = pipeline_configs(f, ctx);
  for (PipelineConfig& c : configs)
    c.mesh.set_order({block.shape.order, block.shape.pp_at});
  return configs;
}

}  // namespace suite::pipeline

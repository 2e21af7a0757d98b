// The planner (model --section plan): every mesh a job could run a model on (TP, CP with its
// method, EP, PP with its schedule, DP, and their order), the ones that fit in a GPU's memory,
// and each one's step time: the composed block's (mesh_model.hpp) forward, input and weight
// gradients per layer, run through the pipeline schedule's critical path (plan_pipeline.hpp:
// the bubble and the hops as the schedule has them), and the gradient sums. PP is modeled only:
// the mesh benchmark runs one block of one stage.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "common/formulas/mesh_model.hpp"
#include "common/formulas/pipeline_schedule.hpp"
#include "common/formulas/plan_terms.hpp"
#include "common/mesh/mesh_layout.hpp"

namespace suite::model {

struct ModelSpec {
  double h = 0, a = 1, n_kv = 1, d_ff = 0;  // d_ff: the MLP's, or each expert's with experts
  int layers = 1;
  int experts = 0;
  double k = 2;
  bool swiglu = false;
  double vocab = 0;  // the embedding's and output layer's rows (0: leave both out)
};

struct JobSpec {
  double s = 0;              // tokens per sequence
  double global_tokens = 0;  // per optimizer step
  double micro_batch = 1;    // sequences per micro-batch (b)
  int gpus = 1;
  double memory_bytes = 0;  // per GPU
  double e = 2, e_grad = 4, lse_e = 4;
  bool causal = true;
  DpShard dp_shard = DpShard::optimizer;  // over DP x CP (Megatron's distributed optimizer)
  Recompute recompute = Recompute::none;
  bool unfused_attention = false;  // the scores through HBM (MeshBlock::unfused_attention)
  // EP's all-to-alls behind another micro-batch's compute (DualPipe): each layer's forward and
  // backward take moe_overlap_step(A, X, M) of their all-to-all A and compute X, not A + X.
  bool ep_overlap = false;
  int max_pp = 64;
  // The schedules tried at PP > 1 (the fastest one kept per mesh) and interleaving's chunks
  // per rank (0: every v from 2 that gives each chunk a layer, up to 8).
  std::vector<pipeline::ScheduleKind> schedules = {
      pipeline::ScheduleKind::one_f_one_b, pipeline::ScheduleKind::interleaved,
      pipeline::ScheduleKind::zb_h1, pipeline::ScheduleKind::zb_v};
  int chunks = 0;
};

struct PlanEntry {
  int T = 1, C = 1, D = 1, E = 1, PP = 1;
  CpMethod cp = CpMethod::ring;
  int u = 1;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::one_f_one_b;
  int chunks = 1;       // v per rank
  int peak_chunks = 1;  // micro-batch chunks the fullest rank holds
  std::array<MeshAxis, 4> order{};
  double micro_batches = 1;  // of job.micro_batch sequences each, per DP rank
  int layers_per_chunk = 1;
  MeshStep block;     // one layer, one micro-batch, with its gradient sums
  double step_s = 0;  // the optimizer step
  // Its parts, which sum to it: compute (the output layer's and the optimizer step's included),
  // each axis's exposed time
  // (dp: the sums and full sharding's gathers), pp (the bubble and the hops) and recompute (full
  // recomputation's second forwards).
  double compute_s = 0, tp_s = 0, cp_s = 0, ep_s = 0, dp_s = 0, pp_s = 0;
  double recompute_s = 0;
  double memory_bytes = 0;
  bool fits = false;
  std::string name() const;           // "tp8-cp16:ring-pp16:interleaved2-dp8 tp,cp,ep,dp"
  std::string cp_name() const;        // none, ring, allgather, ulysses, hybrid:U
  std::string schedule_name() const;  // none at PP 1; 1f1b, interleaved2, zb-h1, zb-v
};

// Every mesh of `job.gpus` GPUs for the model (TP inside a node: T divides the cluster's ranks
// per node; CP by powers of two with s divisible by 2C; every CP method the head counts allow;
// EP a power of two dividing the experts and C D; PP up to job.max_pp with the fastest of the
// job's schedules; DP the rest, dividing the sequences of a step), each with `orders`, ranked by
// step time (those that fit first).
std::vector<PlanEntry> plan_meshes(const ModelSpec& model, const JobSpec& job,
                                   const Cluster& cluster,
                                   const std::vector<std::array<MeshAxis, 4>>& orders);

// Memory per GPU of a mesh: weights, gradients and optimizer state of a rank's layers
// (`layers`: its chunks' together) and of the embedding or output layer, as job.dp_shard shards
// them; the activations of `held` layer micro-batches (the schedule's peak chunks times a
// chunk's layers) as job.recompute keeps them, the MoE's saved rows; one layer's CP buffers,
// its recomputed activations under full recomputation, its gathered weights under full
// sharding, and one micro-batch's logits.
double plan_memory_bytes(const ModelSpec& model, const JobSpec& job, const MeshBlock& m, int layers,
                         int held);

}  // namespace suite::model

#include "common/formulas/mesh_plan.hpp"

#include <algorithm>
#include <cmath>

#include "common/formulas/plan_pipeline.hpp"

namespace suite::model {
namespace {

std::vector<int> powers_of_two_upto(int n) {
  std::vector<int> v;
  for (int x = 1; x <= n; x *= 2)
    v.push_back(x);
  return v;
}

bool whole_heads(double heads, int ranks) {
  return std::fmod(heads, static_cast<double>(ranks)) == 0;
}

// The CP methods a C and the TP rank's heads allow.
std::vector<std::pair<CpMethod, int>> cp_methods(const ModelSpec& md, int T, int C) {
  if (C == 1) return {{CpMethod::ring, 1}};
  std::vector<std::pair<CpMethod, int>> v = {{CpMethod::ring, 1}, {CpMethod::allgather, 1}};
  const double a = md.a / T, kv = md.n_kv / T;
  for (int u = 2; u <= C; u *= 2)
    if (C % u == 0 && whole_heads(a, u) && whole_heads(kv, u))
      v.push_back({u == C ? CpMethod::ulysses : CpMethod::hybrid, u});
  return v;
}

struct Degrees {
  int T, C, D, E;
  CpMethod cp;
  int u;
};

MeshBlock block_of(const ModelSpec& md, const JobSpec& job, const Degrees& d) {
  MeshBlock m;
  m.s = job.s;
  m.b = job.micro_batch;
  m.h = md.h;
  m.a = md.a;
  m.n_kv = md.n_kv;
  m.d_ff = md.d_ff;
  m.T = d.T;
  m.C = d.C;
  m.D = d.D;
  m.cp = d.cp;
  m.u = d.u;
  m.experts = md.experts;
  m.E = d.E;
  m.k = md.k;
  m.swiglu = md.swiglu;
  m.e = job.e;
  m.e_grad = job.e_grad;
  m.lse_e = job.lse_e;
  m.unfused_attention = job.unfused_attention;
  return m;
}

// One layer's forward, input gradient (B) and weight gradients (W) for one micro-batch, each
// with its axes' exposed time (the gradient sums apart): W is the forward's GEMM FLOPs again
// (each weight's gradient is one GEMM of its forward's size), B the rest of the backward.
LayerTimes layer_times(const MeshBlock& m, const MeshStep& forward, const MeshStep& full,
                       const Cluster& cl) {
  const double backward = full.step - full.dp.exposed - forward.step;
  const double weight_grad = mesh_gemm_seconds(m, cl.gemm_table, cl.flops);
  return {forward.step, backward - weight_grad, weight_grad};
}

// With ep_overlap, the part of EP's all-to-all time A still exposed beside compute X over M
// micro-batches: moe_overlap_step(A, X, M) - X.
double overlapped_ep(double a2a, double compute, double micro_batches) {
  return moe_overlap_step(a2a, compute, static_cast<int>(micro_batches)) - compute;
}

// Seconds of Adam's step on a rank of the mesh over its `layers` and the embedding or output
// layer, at HBM's rate, each parameter's state over the ranks that shard it.
double optimizer_step_s(const ModelSpec& md, const JobSpec& job, const MeshBlock& m, int layers,
                        const Cluster& cl) {
  if (!(cl.hbm_bw > 0)) return 0;
  const bool sharded = job.dp_shard != DpShard::none;
  const double holders = sharded ? static_cast<double>(m.C) * m.D : 1,
               copies = sharded ? static_cast<double>(m.T) * m.C * m.D / m.E : 1;
  const double bytes =
      optimizer_step_bytes(layers * mesh_dense_params(m) + vocab_params(m, md.vocab), holders) +
      optimizer_step_bytes(layers * mesh_expert_params(m), copies);
  return bytes / cl.hbm_bw;
}

// The entry's step and its parts: the schedule's critical path over the stage's layers (the
// hops between ranks across nodes: each micro-batch's activations forward, their gradient back,
// the rank's sequence shard), then the gradient sums once a step.
void time_entry(PlanEntry& p, const MeshBlock& m, const MeshStep& forward, const Cluster& cl,
                PipelineTimer& timer, const ModelSpec& md, const JobSpec& job) {
  const int layers = md.layers;
  MeshStep& b = p.block;
  LayerTimes layer = layer_times(m, forward, b, cl);
  if (job.ep_overlap && b.ep.exposed > 0) {
    const double fwd_ep = overlapped_ep(forward.ep.exposed, forward.compute, p.micro_batches);
    const double bwd_ep = overlapped_ep(b.ep.exposed - forward.ep.exposed,
                                        b.compute - forward.compute, p.micro_batches);
    layer.forward += fwd_ep - forward.ep.exposed;
    layer.input_grad += bwd_ep - (b.ep.exposed - forward.ep.exposed);
    b.step += fwd_ep + bwd_ep - b.ep.exposed;
    b.ep.exposed = fwd_ep + bwd_ep;
  }
  // Full recomputation runs the layer's forward again before its input gradient; full
  // sharding gathers the layer's weights before its forward and before its backward.
  const double again = job.recompute == Recompute::full ? forward.step : 0;
  const double gather =
      job.dp_shard == DpShard::full
          ? full_shard_gather_s(m, b.dp.across ? cl.inter.rs_ag : cl.intra.rs_ag) / 2
          : 0;
  layer.forward += gather;
  layer.input_grad += again + gather;
  const double out_gemm = 2 * m.rows() * m.h * md.vocab / m.T;
  const pipeline::OpCosts last =
      md.vocab > 0 ? output_layer_costs(m, md.vocab, gemm_rate(cl.gemm_table, out_gemm, cl.flops))
                   : pipeline::OpCosts{0, 0, 0};
  const pipeline::ScheduleSpec spec{p.schedule, p.PP, static_cast<int>(p.micro_batches), p.chunks};
  p.layers_per_chunk = layers_per_chunk(layers, spec);
  const double act = m.rows() / m.T * m.h * m.e;
  const double hop = p.PP > 1 ? cl.inter.p2p.lat + act / cl.inter.p2p.bw : 0;
  const PipelineTime t = timer.time(spec, layers, layer, {0, 0, 0}, last, hop);
  const double n = p.micro_batches * p.chunks * p.layers_per_chunk;  // layer micro-batches
  p.peak_chunks = t.peak_chunks;
  const double adam = optimizer_step_s(md, job, m, p.chunks * p.layers_per_chunk, cl);
  p.compute_s =
      n * b.compute + p.micro_batches * (last.forward + last.input_grad + last.weight_grad) + adam;
  p.recompute_s = n * again;
  p.tp_s = n * b.tp.exposed;
  p.cp_s = n * b.cp.exposed;
  p.ep_s = n * b.ep.exposed;
  // The sums, once a step, after the path; full sharding's gathers are on the path already
  // (in the layer's times) and counted here, not in compute.
  const double sums = p.chunks * p.layers_per_chunk * b.dp.exposed;
  p.dp_s = sums + n * 2 * gather;
  p.pp_s = t.step - t.busy;  // the bubble and the hops on the path
  p.step_s = t.step + sums + adam;
}

}  // namespace

std::string PlanEntry::cp_name() const {
  if (C == 1) return "none";
  return CpChoice{cp, u}.name();
}

std::string PlanEntry::schedule_name() const {
  if (PP == 1) return "none";
  std::string n = pipeline::schedule_name(schedule);
  if (schedule == pipeline::ScheduleKind::interleaved) n += std::to_string(chunks);
  return n;
}

std::string PlanEntry::name() const {
  std::string n = "tp" + std::to_string(T) + "-cp" + std::to_string(C);
  if (C > 1) n += ":" + cp_name();
  if (E > 1) n += "-ep" + std::to_string(E);
  n += "-pp" + std::to_string(PP);
  if (PP > 1) n += ":" + schedule_name();
  n += "-dp" + std::to_string(D) + " " + mesh_order_name(order);
  return n;
}

double plan_memory_bytes(const ModelSpec& md, const JobSpec& job, const MeshBlock& m, int layers,
                         int held) {
  const double L = layers, holders = static_cast<double>(m.C) * m.D,
               copies = static_cast<double>(m.T) * m.C * m.D / m.E;
  const double per_dense = state_bytes_per_param(m.e, job.dp_shard, holders),
               per_expert = state_bytes_per_param(m.e, job.dp_shard, copies);
  // The stage's layers, and the embedding or the output layer on the first or last stage.
  const double states =
      L * (mesh_dense_params(m) * per_dense + mesh_expert_params(m) * per_expert) +
      vocab_params(m, md.vocab) * per_dense;
  // Activations: the layer's kept bytes and, with experts, the MoE's saved rows (its input
  // copy and the k copies' expert inputs, hidden and outputs), per layer and micro-batch held.
  const double N = m.rows() / m.T;
  const double moe_rows =
      md.experts > 0 ? N * m.h * m.e + m.k * N * (2 * m.h + (md.swiglu ? 3 : 2) * m.d_ff) * m.e : 0;
  const bool full = job.recompute == Recompute::full;
  const double per_layer = held_layer_bytes(m, job.recompute) + (full ? 0 : moe_rows);
  double transient = 0;  // one layer's attention at a time
  if (m.C > 1) {
    const double g = m.g(), h = m.h / m.T;
    if (m.cp == CpMethod::allgather)
      transient = 2 * m.s * m.b * h / g * m.e + 3 * m.c() * m.b * h * m.e;
    else {
      const int u = m.cp == CpMethod::ring ? 1 : m.u;
      const Ring r = hybrid_ring(m.s, h, m.C, u, g, m.e, job.causal, m.b);
      transient = ring_bwd_memory_bytes(r, m.e_grad) + (u > 1 ? 4 * m.c() * m.b * h * m.e : 0);
    }
  }
  if (full) transient += mesh_ledger_bytes(m) + moe_rows;  // the layer recomputed
  if (job.dp_shard == DpShard::full) transient += mesh_dense_params(m) * m.e;  // one layer gathered
  if (md.vocab > 0) transient += logits_bytes(m, md.vocab);
  return states + per_layer * held + transient;
}

std::vector<PlanEntry> plan_meshes(const ModelSpec& md, const JobSpec& job, const Cluster& cl,
                                   const std::vector<std::array<MeshAxis, 4>>& orders) {
  std::vector<PlanEntry> out;
  PipelineTimer timer;
  const double sequences = job.global_tokens / job.s;
  const int P = std::max(1, cl.ranks_per_node);
  for (int T : powers_of_two_upto(P)) {
    if (!whole_heads(md.a, T) || !whole_heads(md.n_kv, T) ||
        (md.experts == 0 && std::fmod(md.d_ff, T) != 0))
      continue;
    for (int C : powers_of_two_upto(job.gpus / T)) {
      if (std::fmod(job.s, 2.0 * C) != 0 || std::fmod(job.s / C, T) != 0) continue;
      for (int PP : powers_of_two_upto(std::min(job.max_pp, job.gpus / (T * C)))) {
        if (job.gpus % (T * C * PP) != 0 || PP > md.layers) continue;
        const int D = job.gpus / (T * C * PP);
        const double per_step = D * job.micro_batch;  // sequences a micro-batch round takes
        if (std::fmod(sequences, per_step) != 0 || sequences < per_step) continue;
        const int mb = static_cast<int>(sequences / per_step);
        std::vector<pipeline::ScheduleSpec> specs = {
            {pipeline::ScheduleKind::one_f_one_b, 1, mb, 1}};
        if (PP > 1) specs = pipeline_candidates(job.schedules, job.chunks, PP, mb, md.layers);
        std::vector<int> eps = {1};
        if (md.experts > 0) {
          eps.clear();
          for (int E : powers_of_two_upto(C * D))
            if ((C * D) % E == 0 && md.experts % E == 0) eps.push_back(E);
        }
        for (int E : eps)
          for (auto [cp, u] : cp_methods(md, T, C))
            for (const auto& order : orders) {
              const MeshBlock m = block_of(md, job, {T, C, D, E, cp, u});
              MeshStep forward, full;
              try {
                const MeshLayout layout(MeshShape{T, C, D, E, 1, order}, T * C * D);
                forward = mesh_step(m, layout, cl, /*backward=*/false, job.causal);
                full = mesh_step(m, layout, cl, /*backward=*/true, job.causal);
              } catch (const std::exception&) {
                continue;  // an order this mesh cannot take (an expert group over TP indices)
              }
              for (const pipeline::ScheduleSpec& spec : specs) {
                PlanEntry p;
                p.T = T, p.C = C, p.D = D, p.E = E, p.PP = PP, p.cp = cp, p.u = u;
                p.order = order;
                p.schedule = spec.kind;
                p.chunks = spec.chunks;
                p.micro_batches = mb;
                p.block = full;
                time_entry(p, m, forward, cl, timer, md, job);
                p.memory_bytes = plan_memory_bytes(md, job, m, p.chunks * p.layers_per_chunk,
                                                   p.peak_chunks * p.layers_per_chunk);
                p.fits = p.memory_bytes <= job.memory_bytes;
                out.push_back(p);
              }
            }
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const PlanEntry& x, const PlanEntry& y) {
    if (x.fits != y.fits) return x.fits;
    return x.step_s < y.step_s;
  });
  return out;
}

}  // namespace suite::model

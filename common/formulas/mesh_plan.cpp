#include "common/formulas/mesh_plan.hpp"

#include <algorithm>
#include <cmath>

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

}  // namespace

std::string PlanEntry::cp_name() const {
  if (C == 1) return "none";
  return CpChoice{cp, u}.name();
}

std::string PlanEntry::name() const {
  std::string n = "tp" + std::to_string(T) + "-cp" + std::to_string(C);
  if (C > 1) n += ":" + cp_name();
  if (E > 1) n += "-ep" + std::to_string(E);
  n += "-pp" + std::to_string(PP) + "-dp" + std::to_string(D) + " " + mesh_order_name(order);
  return n;
}

double plan_memory_bytes(const ModelSpec& md, const JobSpec& job, const MeshBlock& m, int PP,
                         int layers_per_stage) {
  const double L = layers_per_stage, copies = static_cast<double>(m.T) * m.C * m.D / m.E;
  // bf16 weights, fp32 gradients, Adam's fp32 master weights and two moments (12 bytes),
  // sharded over DP x CP (experts: over their copies) under ZeRO-1.
  const double opt_dense = job.zero1 ? 12.0 / (m.C * m.D) : 12.0,
               opt_expert = job.zero1 ? 12.0 / copies : 12.0;
  const double states = L * (mesh_dense_params(m) * (m.e + 4 + opt_dense) +
                             mesh_expert_params(m) * (m.e + 4 + opt_expert));
  // Activations: the layer's ledger and, with experts, the MoE's saved rows (its input copy and
  // the k copies' expert inputs, hidden and outputs), per layer and micro-batch in flight.
  const double N = m.rows() / m.T;
  double per_layer = mesh_ledger_bytes(m);
  if (md.experts > 0)
    per_layer += N * m.h * m.e + m.k * N * (2 * m.h + (md.swiglu ? 3 : 2) * m.d_ff) * m.e;
  const double in_flight = PP;  // 1F1B: the first stage holds PP micro-batches
  double transient = 0;         // one layer's attention at a time
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
  return states + per_layer * L * in_flight + transient;
}

std::vector<PlanEntry> plan_meshes(const ModelSpec& md, const JobSpec& job, const Cluster& cl,
                                   const std::vector<std::array<MeshAxis, 4>>& orders) {
  std::vector<PlanEntry> out;
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
        if (std::fmod(sequences, D) != 0 || sequences < D) continue;
        const int L = (md.layers + PP - 1) / PP;
        std::vector<int> eps = {1};
        if (md.experts > 0) {
          eps.clear();
          for (int E : powers_of_two_upto(C * D))
            if ((C * D) % E == 0 && md.experts % E == 0) eps.push_back(E);
        }
        for (int E : eps)
          for (auto [cp, u] : cp_methods(md, T, C))
            for (const auto& order : orders) {
              MeshShape shape;
              shape.tp = T;
              shape.cp = C;
              shape.dp = D;
              shape.ep = E;
              shape.order = order;
              MeshBlock m;
              m.s = job.s;
              m.b = 1;
              m.h = md.h;
              m.a = md.a;
              m.n_kv = md.n_kv;
              m.d_ff = md.d_ff;
              m.T = T;
              m.C = C;
              m.D = D;
              m.cp = cp;
              m.u = u;
              m.experts = md.experts;
              m.E = E;
              m.k = md.k;
              m.swiglu = md.swiglu;
              m.e = job.e;
              m.e_grad = job.e_grad;
              m.lse_e = job.lse_e;
              PlanEntry p;
              try {
                const MeshLayout layout(shape, T * C * D);
                p.block = mesh_step(m, layout, cl, /*backward=*/true, job.causal);
              } catch (const std::exception&) {
                continue;  // an order this mesh cannot take (an expert group over TP indices)
              }
              p.T = T;
              p.C = C;
              p.D = D;
              p.E = E;
              p.PP = PP;
              p.cp = cp;
              p.u = u;
              p.order = order;
              p.micro_batches = sequences / D;
              p.layers_per_stage = L;
              const MeshStep& b = p.block;
              const double mb = p.micro_batches, layer = b.step - b.dp.exposed;
              // Between stages, each micro-batch's activations forward and their gradient back
              // (the rank's sequence shard), across nodes.
              const double act = m.rows() / T * m.h * m.e;
              const double hop = PP > 1 ? 2 * (cl.inter.p2p.lat + act / cl.inter.p2p.bw) : 0;
              const double per_mb = L * layer + hop;
              p.compute_s = mb * L * b.compute;
              p.tp_s = mb * L * b.tp.exposed;
              p.cp_s = mb * L * b.cp.exposed;
              p.ep_s = mb * L * b.ep.exposed;
              p.dp_s = L * b.dp.exposed;              // the sums, once a step
              p.pp_s = (PP - 1) * per_mb + mb * hop;  // the bubble and the hops
              p.step_s = (mb + PP - 1) * per_mb + p.dp_s;
              p.memory_bytes = plan_memory_bytes(md, job, m, PP, L);
              p.fits = p.memory_bytes <= job.memory_bytes;
              out.push_back(p);
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

#include "common/formulas/mesh_model.hpp"

#include <algorithm>

namespace suite::model {
namespace {

// Whether the ranks lie on more than one node.
bool spans(const std::vector<int>& g, int ranks_per_node) {
  return std::any_of(g.begin(), g.end(),
                     [&](int r) { return r / ranks_per_node != g.front() / ranks_per_node; });
}

// Whether rank 0's group along the axis holds ranks of more than one node.
bool spans_nodes(const MeshLayout& layout, MeshAxis a, int ranks_per_node) {
  return spans(a == MeshAxis::dp ? layout.dense_replicas(0) : layout.group(a, 0), ranks_per_node);
}

const LevelRates& rates(const Cluster& c, bool across) {
  return across ? c.inter : c.intra;
}

// `calls` all-to-alls over group g, each sending `bytes` a rank in equal shares to its n - 1
// peers: the shares for peers on other nodes cross the network while those for its own node's
// move over the node's links, the two at once (a NIC a GPU); each peer's latency at the slower
// level's.
double a2a_seconds(const std::vector<int>& g, double bytes, int calls, const Cluster& c, int P) {
  const auto n = static_cast<double>(g.size());
  const double same = static_cast<double>(std::count_if(
                          g.begin(), g.end(), [&](int r) { return r / P == g.front() / P; })) -
                      1;
  const double off = n - 1 - same;
  const double lat = (off > 0 ? c.inter : c.intra).a2a.lat;
  return calls * (n - 1) * lat +
         std::max(bytes * off / (n - 1) / c.inter.a2a.bw, bytes * same / (n - 1) / c.intra.a2a.bw);
}

}  // namespace

double mesh_gemm_flops(const MeshBlock& m) {
  const double d = m.h / m.a, R = m.rows(), N = R / m.T;
  double f = 2 * R * m.h * (m.a + 2 * m.n_kv) * d / m.T + 2 * R * (m.h / m.T) * m.h;
  if (m.experts == 0) return f + 2 * 2 * R * m.h * m.d_ff / m.T;
  return f + N * m.k * moe_expert_flops_per_pair(m.h, m.d_ff, m.swiglu) + 2 * N * m.h * m.experts;
}

double mesh_attention_flops(const MeshBlock& m, bool causal) {
  const double pairs = m.s * m.s * (causal ? 0.5 : 1) / m.C * m.b;  // this rank's share
  return 4 * pairs * m.h / m.T;
}

MeshStep mesh_step(const MeshBlock& m, const MeshLayout& layout, const Cluster& cl, bool backward,
                   bool causal) {
  MeshStep st;
  const int P = std::max(1, cl.ranks_per_node);
  const double F = cl.flops, Fa = cl.attn_flops > 0 ? cl.attn_flops : F,
               Fb = cl.attn_flops_bwd > 0 ? cl.attn_flops_bwd : Fa;
  const double attn = mesh_attention_flops(m, causal);
  const double gemm_s = mesh_gemm_seconds(m, cl.gemm_table, F);
  st.compute = gemm_s + attn / Fa + (backward ? 2 * gemm_s + 2.5 * attn / Fb : 0);
  if (m.unfused_attention) {  // its batched GEMMs at the GEMM rate in place of the fused kernel's
    const double f = unfused_attention_flops(m), per_call = f / 2;
    st.compute += (backward ? 3 : 1) * f / gemm_rate(cl.gemm_table, per_call, F) - attn / Fa -
                  (backward ? 2.5 * attn / Fb : 0);
  }
  if (cl.hbm_bw > 0) {
    const ElementwiseBytes eb = mesh_elementwise_bytes(m, m.unfused_attention);
    st.compute += (eb.forward + (backward ? eb.backward : 0)) / cl.hbm_bw;
  }

  // TP: the layer's all-gathers and reduce-scatters (and the gradients' all-reduces), blocking.
  st.tp.bytes = mesh_tp_bytes(m, backward);
  st.tp.across = spans_nodes(layout, MeshAxis::tp, P);
  const int tp_calls = (m.experts == 0 ? 4 : 2) + (backward ? (m.experts == 0 ? 7 : 5) : 0);
  if (m.T > 1) {
    const LinkLevel& l = rates(cl, st.tp.across).rs_ag;
    st.tp.time = tp_calls * (m.T - 1) * l.lat + st.tp.bytes / l.bw;
  }
  st.tp.exposed = st.tp.time;

  // CP: the ring per round against that round's attention; the all-gather's and Ulysses'
  // collectives exposed. A hybrid: Ulysses inside groups of u CP ranks, the ring across the
  // C / u groups, each on the link its own ranks span. The ring's rounds run in lockstep at
  // its slowest hop's pace (a ring that crosses nodes at the network's): a rank waits for its
  // send as for its receive, so the two ranks at the slowest hop set every round's pace.
  st.cp.bytes = mesh_cp_bytes(m, backward);
  if (m.C > 1) {
    const std::vector<int> cpg = layout.group(MeshAxis::cp, 0);
    const double g = m.g(), h = m.h / m.T;
    const double kv = 2 * m.c() * m.b * h / g * m.e, dkv = 2 * m.c() * m.b * h / g * m.e_grad;
    if (m.cp == CpMethod::allgather) {
      st.cp.across = spans(cpg, P);
      const LinkLevel& l = rates(cl, st.cp.across).rs_ag;
      st.cp.time = (m.C - 1) * (l.lat + kv / l.bw);
      if (backward)
        st.cp.time += (m.C - 1) * l.lat +
                      ring_allgather_bwd_bytes_per_layer(m.s, h, m.C, g, m.e_grad, m.b) / l.bw;
      st.cp.exposed = st.cp.time;
    } else {
      const int u = m.cp == CpMethod::ring ? 1 : m.cp == CpMethod::ulysses ? m.C : m.u, G = m.C / u;
      if (u > 1) {  // the all-to-alls of Q, K, V and the output (and the backward's four)
        const std::vector<int> ug(cpg.begin(), cpg.begin() + u);
        st.cp.across = st.cp.across || spans(ug, P);
        const double bytes = hybrid_ulysses_bytes_per_layer(m.s, h, m.C, u, g, m.e) * m.b;
        const double t = (backward ? 2 : 1) * a2a_seconds(ug, bytes, 4, cl, P);
        st.cp.time += t;
        st.cp.exposed += t;
      }
      if (G > 1) {  // the ring over G ranks, one K/V block a round beside 1/G of the attention
        std::vector<int> rg;
        for (int i = 0; i < G; ++i)
          rg.push_back(cpg[static_cast<std::size_t>(i * u)]);
        const bool across = spans(rg, P);
        st.cp.across = st.cp.across || across;
        const LinkLevel& l = rates(cl, across).p2p;
        const double round_fwd = attn / Fa / G, xfer = l.lat + kv / l.bw;
        st.cp.time += (G - 1) * xfer;
        st.cp.exposed += (G - 1) * std::max(0.0, xfer - round_fwd);
        if (backward) {
          const double round_bwd = 2.5 * attn / Fb / G, both = l.lat + (kv + dkv) / l.bw;
          st.cp.time += (G - 1) * both + l.lat + dkv / l.bw;
          st.cp.exposed += (G - 1) * std::max(0.0, both - round_bwd) + l.lat + dkv / l.bw;
        }
      }
    }
  }

  // EP: dispatch and combine all-to-alls, blocking (uniform routing's bytes).
  st.ep.bytes = mesh_ep_bytes_uniform(m, backward);
  st.ep.across = spans_nodes(layout, MeshAxis::ep, P);
  if (m.experts > 0 && m.E > 1) {
    const LinkLevel& l = rates(cl, st.ep.across).a2a;
    st.ep.time = (backward ? 4 : 2) * (m.E - 1) * l.lat + st.ep.bytes / l.bw;
  }
  st.ep.exposed = st.ep.time;

  // DP: the gradient sums after the backward, the dense gradients over the C D ranks that hold
  // them and the experts' over their copies, each on the link its group spans.
  if (backward) {
    st.dp.bytes = mesh_grad_sum_bytes(m);
    const int cd = m.C * m.D, copies = m.T * m.C * m.D / std::max(1, m.E);
    const bool dense_across = spans_nodes(layout, MeshAxis::dp, P);
    const LinkLevel& dl = rates(cl, dense_across).all_reduce;
    if (cd > 1)
      st.dp.time +=
          2 * (cd - 1) * dl.lat + all_reduce_bytes_per_rank(mesh_dense_params(m) * m.e, cd) / dl.bw;
    if (m.experts > 0 && copies > 1) {
      const bool experts_across = spans(layout.expert_replicas(0), P);
      const LinkLevel& el = rates(cl, experts_across).all_reduce;
      st.dp.time += 2 * (copies - 1) * el.lat +
                    all_reduce_bytes_per_rank(mesh_expert_params(m) * m.e, copies) / el.bw;
      st.dp.across = experts_across;
    }
    st.dp.across = st.dp.across || dense_across;
    st.dp.exposed = st.dp.time;
  }
  st.step = st.compute + st.tp.exposed + st.cp.exposed + st.ep.exposed + st.dp.exposed;
  return st;
}

}  // namespace suite::model

#include "common/formulas/model.hpp"

#include <algorithm>

namespace suite::model {

double rs_or_ag_bytes_per_rank(double n, int t) {
  return (t - 1) * n / t;
}
double all_reduce_bytes_per_rank(double n, int t) {
  return 2 * rs_or_ag_bytes_per_rank(n, t);
}
double busbw_factor_all_reduce(int t) {
  return 2.0 * (t - 1) / t;
}
double busbw_factor_rs_ag_a2a(int t) {
  return static_cast<double>(t - 1) / t;
}

double tp_layer_comm_bytes_per_rank(double s, double b, double h, int t, double e) {
  return 2 * all_reduce_bytes_per_rank(s * b * h * e, t);
}
double sp_layer_comm_bytes_per_rank(double s, double b, double h, int t, double e) {
  return 4 * rs_or_ag_bytes_per_rank(s * b * h * e, t);
}

namespace {
// Per sbh: replicated under TP (LayerNorm inputs/outputs and dropout masks), divided by t
// (Q, K, V, projection input, MLP intermediates), and the attention-scores term.
double act_fixed(const Activation& x) {
  return 4 * x.e + 2;
}
double act_split(const Activation& x) {
  return x.e * (4 + 2 * x.ffn);
}
double act_scores(const Activation& x) {
  return (2 * x.e + 1) * x.a * x.s / x.h;
}
}  // namespace

double act_bytes_no_parallel(const Activation& x) {
  return x.s * x.b * x.h * (act_fixed(x) + act_split(x) + act_scores(x));
}
double act_bytes_tp(const Activation& x) {
  return x.s * x.b * x.h * (act_fixed(x) + (act_split(x) + act_scores(x)) / x.t);
}
double act_bytes_tp_sp(const Activation& x) {
  return x.s * x.b * x.h / x.t * (act_fixed(x) + act_split(x) + act_scores(x));
}
double act_bytes_tp_flash(const Activation& x) {
  return x.s * x.b * x.h * (act_fixed(x) + act_split(x) / x.t);
}
double act_bytes_tp_sp_flash(const Activation& x) {
  return x.s * x.b * x.h / x.t * (act_fixed(x) + act_split(x));
}

double act_bytes_no_parallel_flash(const Activation& x) {
  return x.s * x.b * x.h * (act_fixed(x) + act_split(x));
}
namespace {
// Forward FLOPs of one layer, all ranks together: the matmuls (Q, K, V, output projection: 4;
// the MLP: 2 d_ff/h, each 2 sbh^2) and attention (QK^T and PV, 2 s^2 b h each).
double layer_matmul_flops(const Activation& x) {
  return 2 * x.s * x.b * x.h * x.h * (4 + 2 * x.ffn);
}
double layer_attention_flops(const Activation& x, bool causal) {
  return 4 * x.s * x.s * x.b * x.h * (causal ? 0.5 : 1);
}
}  // namespace

double layer_flops_per_rank(const Activation& x, bool causal) {
  return (layer_matmul_flops(x) + layer_attention_flops(x, causal)) / x.t;
}

LayerCollectives tp_layer_collectives(bool /*backward*/) {
  return {2, 0, 0};
}
LayerCollectives sp_layer_collectives(bool backward) {
  return {0, 2, backward ? 4 : 2};
}
double layer_collectives_bytes_per_rank(const LayerCollectives& c, double n, int t) {
  return c.all_reduce * all_reduce_bytes_per_rank(n, t) +
         (c.reduce_scatter + c.all_gather) * rs_or_ag_bytes_per_rank(n, t);
}
double tp_layer_comm_bytes_fwd_bwd(double s, double b, double h, int t, double e) {
  const double n = s * b * h * e;
  return layer_collectives_bytes_per_rank(tp_layer_collectives(false), n, t) +
         layer_collectives_bytes_per_rank(tp_layer_collectives(true), n, t);
}
double sp_layer_comm_bytes_fwd_bwd(double s, double b, double h, int t, double e) {
  const double n = s * b * h * e;
  return layer_collectives_bytes_per_rank(sp_layer_collectives(false), n, t) +
         layer_collectives_bytes_per_rank(sp_layer_collectives(true), n, t);
}
double sp_layernorm_grad_bytes_per_rank(double h, int t, double e) {
  return all_reduce_bytes_per_rank(4 * h * e, t);  // 2 LayerNorms x (weight + bias) x h
}
double layer_bwd_attention_flops_per_rank(const Activation& x, bool causal) {
  return 2.5 * layer_attention_flops(x, causal) / x.t;  // five matmuls against two
}
double layer_bwd_flops_per_rank(const Activation& x, bool causal) {
  // input and weight gradients of every GEMM: twice its forward FLOPs
  return 2 * layer_matmul_flops(x) / x.t + layer_bwd_attention_flops_per_rank(x, causal);
}

double ring_flops_per_round(const Ring& r) {
  return 4 * r.c * r.c * r.h * r.b;
}
double ring_bytes_per_round(const Ring& r) {
  return 2 * r.c * r.h * r.e * r.b / r.g;
}
double ring_bytes_per_layer(const Ring& r) {
  return (r.n_c - 1) * ring_bytes_per_round(r);
}
double ring_min_block(double flops_per_s, double bytes_per_s, double g, bool causal, double e) {
  return (causal ? 2 : 1) * flops_per_s / (g * bytes_per_s) * (e / 2);
}
double ring_memory_bytes(const Ring& r) {
  double block = r.c * r.h * r.e * r.b;
  return 2 * block + 4 * block / r.g;  // Q and output, plus K, V current and in flight
}
double ring_causal_steps_contiguous(int n_c) {
  return n_c - 0.5;
}
double ring_causal_steps_balanced(int n_c) {
  return n_c / 2.0;
}
double ring_bwd_flops_per_round(const Ring& r) {
  return 10 * r.c * r.c * r.h * r.b;
}
namespace {
double ring_grad_bytes_per_hop(const Ring& r, double e_grad) {  // dK and dV partial sums
  return 2 * r.c * r.h * e_grad * r.b / r.g;
}
}  // namespace
double ring_bwd_bytes_per_round(const Ring& r, double e_grad) {
  return ring_bytes_per_round(r) + ring_grad_bytes_per_hop(r, e_grad);
}
double ring_bwd_bytes_per_layer(const Ring& r, double e_grad) {
  if (r.n_c <= 1) return 0;  // the only block is the rank's own: nothing travels
  return ring_bytes_per_layer(r) + r.n_c * ring_grad_bytes_per_hop(r, e_grad);
}
double ring_min_block_bwd(double flops_bwd_per_s, double bytes_per_s, double g,
                          bool causal_balanced, double e, double e_grad) {
  return (causal_balanced ? 2 : 1) * (e + e_grad) / (5 * g) * flops_bwd_per_s / bytes_per_s;
}
double ring_bwd_memory_bytes(const Ring& r, double e_grad) {
  const double block = r.c * r.h * r.b;
  return block * (3 * r.e + e_grad) + block / r.g * (4 * r.e + 6 * e_grad);
}
double ring_allgather_bwd_bytes_per_layer(double s, double h, int n_c, double g, double e_grad,
                                          double b) {
  return rs_or_ag_bytes_per_rank(2 * s * h * b * e_grad / g, n_c);
}

double ulysses_bytes_per_layer(double s, double h, int n_c, double g, double e) {
  double per_tensor = static_cast<double>(n_c - 1) / n_c * s * h * e / n_c;
  return per_tensor * (2 + 2 / g);
}
bool ulysses_degree_ok(int n_c, int heads, int kv_heads) {
  return n_c >= 1 && heads % n_c == 0 && kv_heads % n_c == 0;
}
Ring hybrid_ring(double s, double h, int n_c, int u, double g, double e, bool causal, double b) {
  return {h / u, s * u / n_c, n_c / u, g, e, causal, b};
}
double hybrid_ulysses_bytes_per_layer(double s, double h, int n_c, int u, double g, double e) {
  return ulysses_bytes_per_layer(s * u / n_c, h, u, g, e);
}
double ulysses_bwd_bytes_per_layer(double s, double h, int n_c, double g, double e) {
  return ulysses_bytes_per_layer(s, h, n_c, g, e);  // dO in, dQ, dK, dV out
}
double hybrid_ulysses_bwd_bytes_per_layer(double s, double h, int n_c, int u, double g, double e) {
  return hybrid_ulysses_bytes_per_layer(s, h, n_c, u, g, e);
}

double moe_a2a_bytes_per_rank(double k, double tokens, double h, int n_e, double e) {
  return 2 * k * tokens * h * e * (n_e - 1) / n_e;
}
double moe_expert_flops_per_pair(double h, double d_ff, bool swiglu) {
  return (swiglu ? 6 : 4) * h * d_ff;
}
double moe_a2a_to_expert_ratio(double flops_per_s, double bytes_per_s, int n_e, double d_ff,
                               bool swiglu) {
  double r = flops_per_s / bytes_per_s * (n_e - 1) / n_e / d_ff;
  return swiglu ? r / 1.5 : r;
}
double moe_overlap_step(double a2a_s, double compute_s, int microbatches) {
  return std::max(a2a_s, compute_s) + std::min(a2a_s, compute_s) / microbatches;
}
double moe_overlap_dff_star(double flops_per_s, double bytes_per_s, int n_e, double e,
                            bool swiglu) {
  return moe_a2a_to_expert_ratio(flops_per_s, bytes_per_s, n_e, 1.0, swiglu) * e / 2;
}
double moe_capacity(double capacity_factor, double k, double tokens, int experts) {
  return capacity_factor * k * tokens / experts;
}
double moe_aux_loss(const double* f, const double* p, int experts, double alpha) {
  double sum = 0;
  for (int i = 0; i < experts; ++i)
    sum += f[i] * p[i];
  return alpha * experts * sum;
}
double moe_a2a_bytes_per_rank_fwd_bwd(double k, double tokens, double h, int n_e, double e) {
  return 2 * moe_a2a_bytes_per_rank(k, tokens, h, n_e, e);
}
double moe_expert_bwd_flops_per_pair(double h, double d_ff, bool swiglu) {
  return 2 * moe_expert_flops_per_pair(h, d_ff, swiglu);
}
double moe_bwd_a2a_to_expert_ratio(double flops_per_s, double bytes_per_s, int n_e, double d_ff,
                                   bool swiglu) {
  return moe_a2a_to_expert_ratio(flops_per_s, bytes_per_s, n_e, d_ff, swiglu) / 2;
}
MoeCollectives moe_collectives_fwd(bool capacity, bool hierarchical) {
  if (hierarchical) return {2, 5, capacity ? 1 : 0};
  return {1, 2, capacity ? 1 : 0};
}
MoeCollectives moe_collectives_bwd(bool hierarchical) {
  return {0, hierarchical ? 5 : 2, 1};
}
double moe_inter_rows_per_token_flat(int k, int /*experts*/, int nodes) {
  return static_cast<double>(k) * (nodes - 1) / nodes;
}
double moe_inter_rows_per_token_hier(int k, int experts, int nodes) {
  // P(a given node holds none of the k) = C(E - E/M, k) / C(E, k).
  const double per_node = static_cast<double>(experts) / nodes;
  double none = 1;
  for (int i = 0; i < k; ++i)
    none *= std::max(0.0, (experts - per_node - i) / (experts - i));
  return (nodes - 1) * (1 - none);
}
double moe_control_bytes_fwd(int experts, int n_e, double k, double tokens, bool capacity) {
  const double per_peer = 8.0 * experts / n_e + (capacity ? 8 * 2 * k * tokens : 0.0);
  return (n_e - 1) * per_peer;
}
double moe_control_bytes_bwd(int experts, int n_e) {
  return (n_e - 1) * 8.0 * experts;
}

double TpOverlapOp::gemm_s() const {
  return t * step_gemm_s;
}

std::vector<TpOverlapOp> tp_overlap_ops(double s, double b, double h, double a, double n_kv,
                                        double d_ff, bool swiglu, int t, double e, double F,
                                        double W) {
  const double rows = s * b / t;
  const double qkv = 1 + 2 * n_kv / a, fc1 = (swiglu ? 2 : 1) * d_ff / h, fc2 = d_ff / h;
  struct Def {
    const char* name;
    const char* collective;
    double c;
  };
  const Def defs[] = {{"qkv", "all-gather", qkv},
                      {"out_proj", "reduce-scatter", 1},
                      {"fc1", "all-gather", fc1},
                      {"fc2", "reduce-scatter", fc2},
                      {"bwd_qkv_dx", "reduce-scatter", qkv},
                      {"bwd_qkv_dw", "all-gather", qkv},
                      {"bwd_out_proj_dy", "all-gather", 1},
                      {"bwd_fc1_dx", "reduce-scatter", fc1},
                      {"bwd_fc1_dw", "all-gather", fc1},
                      {"bwd_fc2_dy", "all-gather", fc2}};
  std::vector<TpOverlapOp> out;
  for (const Def& d : defs) {
    TpOverlapOp op;
    op.name = d.name;
    op.collective = d.collective;
    op.c = d.c;
    op.t = t;
    op.flops_per_step = 2 * rows * h * (d.c * h / t);
    op.bytes_per_step = rows * h * e;
    op.threshold = e * F / (2 * d.c * W);
    op.step_gemm_s = op.flops_per_step / F;
    op.step_comm_s = op.bytes_per_step / W;
    op.serial_s = t * op.step_gemm_s + (t - 1) * op.step_comm_s;
    op.overlapped_s = op.step_gemm_s + (t - 1) * std::max(op.step_gemm_s, op.step_comm_s);
    out.push_back(op);
  }
  return out;
}

// ---- 6. The axes on one mesh ----
double mesh_tp_bytes(const MeshBlock& m, bool backward) {
  const double n = m.rows() * m.h * m.e, step = static_cast<double>(m.T - 1) / m.T * n;
  const bool dense = m.experts == 0;
  double bytes = (dense ? 4 : 2) * step;  // all-gathers before QKV (fc1), reduce-scatters after
  if (!backward) return bytes;
  bytes += (dense ? 6 : 3) * step;  // g_bar's all-gather, g's reduce-scatter, the re-gather
  bytes += all_reduce_bytes_per_rank(4 * m.h * m.e, m.T);  // LayerNorm weight and bias grads
  if (!dense) bytes += all_reduce_bytes_per_rank(m.h * m.experts * m.e, m.T);  // the router's
  return bytes;
}

double mesh_cp_bytes(const MeshBlock& m, bool backward) {
  if (m.C <= 1) return 0;
  const double h = m.h / m.T, g = m.g();
  if (m.cp == CpMethod::ring || m.cp == CpMethod::allgather) {
    const Ring r{h, m.c(), m.C, g, m.e, false, m.b};
    double bytes = ring_bytes_per_layer(r);
    if (backward)
      bytes += m.cp == CpMethod::ring
                   ? ring_bwd_bytes_per_layer(r, m.e_grad)
                   : ring_allgather_bwd_bytes_per_layer(m.s, h, m.C, g, m.e_grad, m.b);
    return bytes;
  }
  const int u = m.cp == CpMethod::ulysses ? m.C : m.u;
  double bytes = hybrid_ulysses_bytes_per_layer(m.s, h, m.C, u, g, m.e) * m.b;
  if (backward) bytes *= 2;  // dO in, dQ, dK, dV out: the forward's bytes again
  if (u < m.C) {
    const Ring r = hybrid_ring(m.s, h, m.C, u, g, m.e, false, m.b);
    bytes += ring_bytes_per_layer(r);
    if (backward) bytes += ring_bwd_bytes_per_layer(r, m.e_grad);
  }
  return bytes;
}

double mesh_ep_bytes_uniform(const MeshBlock& m, bool backward) {
  if (m.experts == 0) return 0;
  const double bytes = moe_a2a_bytes_per_rank(m.k, m.rows() / m.T, m.h, m.E, m.e);
  return backward ? 2 * bytes : bytes;
}

double mesh_dense_params(const MeshBlock& m) {
  const double d = m.h / m.a;
  double p = 4 * m.h + m.h * (m.a + 2 * m.n_kv) * d / m.T + m.h * m.h / m.T;
  if (m.experts == 0) return p + 2 * m.h * m.d_ff / m.T;
  return p + m.h * m.experts;
}

double mesh_expert_params(const MeshBlock& m) {
  if (m.experts == 0) return 0;
  return static_cast<double>(m.experts) / m.E * (m.h * m.d_ff * (m.swiglu ? 2 : 1) + m.d_ff * m.h);
}

double mesh_grad_sum_bytes(const MeshBlock& m) {
  const int replicas = m.C * m.D, copies = m.T * m.C * m.D / m.E;
  return all_reduce_bytes_per_rank(mesh_dense_params(m) * m.e, replicas) +
         all_reduce_bytes_per_rank(mesh_expert_params(m) * m.e, copies);
}

double mesh_ledger_bytes(const MeshBlock& m) {
  const double L = m.rows() / m.T, R = m.rows(), d = m.h / m.a;
  // LayerNorm inputs and output, the output projection's input, the two dropout masks.
  double bytes = 3 * L * m.h * m.e + 2 * L * m.h + R * m.h / m.T * m.e;
  if (m.C == 1)  // Q, K, V and the lse; with C > 1 the CP part keeps them
    bytes += R * (m.a + 2 * m.n_kv) * d / m.T * m.e + m.b * m.a / m.T * m.c() * m.lse_e;
  if (m.experts == 0)  // the second LayerNorm's output, fc1's output and GeLU's
    bytes += L * m.h * m.e + 2 * R * m.d_ff / m.T * m.e;
  return bytes;
}

}  // namespace suite::model

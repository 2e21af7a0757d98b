#include "common/formulas/plan_compute.hpp"

#include <cmath>

#include "common/formulas/mesh_model.hpp"

namespace suite::model {

double gemm_rate(const std::vector<GemmPoint>& table, double flops, double fallback) {
  if (table.empty()) return fallback;
  if (flops <= table.front().flops) return table.front().rate;
  if (flops >= table.back().flops) return table.back().rate;
  for (std::size_t i = 1; i < table.size(); ++i) {
    const GemmPoint &lo = table[i - 1], &hi = table[i];
    if (flops > hi.flops) continue;
    const double x = std::log(flops / lo.flops) / std::log(hi.flops / lo.flops);
    return lo.rate + x * (hi.rate - lo.rate);
  }
  return table.back().rate;
}

std::vector<double> mesh_gemm_list(const MeshBlock& m) {
  const double d = m.h / m.a, R = m.rows(), N = R / m.T;
  std::vector<double> g = {2 * R * (m.a + 2 * m.n_kv) * d / m.T * m.h, 2 * R * m.h * (m.h / m.T)};
  if (m.experts == 0) {
    g.push_back(2 * R * (m.d_ff / m.T) * m.h);
    g.push_back(2 * R * m.h * (m.d_ff / m.T));
    return g;
  }
  const double local = m.experts / static_cast<double>(m.E);
  const double rows = m.k * N / local;  // each local expert's, uniform routing
  for (int i = 0; i < static_cast<int>(local); ++i) {
    g.push_back(2 * rows * m.d_ff * m.h * (m.swiglu ? 2 : 1));
    g.push_back(2 * rows * m.h * m.d_ff);
  }
  g.push_back(2 * N * m.h * m.experts);
  return g;
}

double mesh_gemm_seconds(const MeshBlock& m, const std::vector<GemmPoint>& table, double flops) {
  if (table.empty()) return mesh_gemm_flops(m) / flops;
  double t = 0;
  for (double f : mesh_gemm_list(m))
    t += f / gemm_rate(table, f, flops);
  return t;
}

double unfused_attention_flops(const MeshBlock& m) {
  return 4 * m.rows() * m.s * m.h / m.T;
}

ElementwiseBytes mesh_elementwise_bytes(const MeshBlock& m, bool unfused_attention) {
  const double n = m.rows() / m.T, e = m.e;
  const double hidden =
      m.experts == 0 ? m.rows() * m.d_ff / m.T : m.k * n * m.d_ff;  // activation's rows x width
  ElementwiseBytes b;
  b.forward = 2 * 2 * n * m.h * e + 2 * n * m.h * (3 * e + 1) + (m.swiglu ? 3 : 2) * hidden * e;
  b.backward = 2 * 3 * n * m.h * e + 2 * n * m.h * (2 * e + 1) + (m.swiglu ? 5 : 3) * hidden * e;
  if (unfused_attention) {
    const double S = m.rows() * m.s * m.a / m.T;
    b.forward += 2 * S * e + S * (2 * e + 1);
    b.backward += 3 * S * e + S * (2 * e + 1);
  }
  return b;
}

double optimizer_step_bytes(double params, double shards) {
  return 30 * params / shards;
}

}  // namespace suite::model

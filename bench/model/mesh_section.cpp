#include "bench/model/mesh_section.hpp"

#include <cstdio>

#include "common/formulas/mesh_model.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"

namespace suite::model_cli {
namespace {

void line(const char* what, double v, const char* unit) {
  std::printf("  %-52s %16.6g %s\n", what, v, unit);
}

}  // namespace

void print_mesh(const Params& p, const MeshOptions& o, double e, double e_grad) {
  if (o.dp < 1) throw UsageError("--dp " + std::to_string(o.dp) + " must be >= 1");
  if (o.ranks_per_node < 1)
    throw UsageError("--ranks-per-node " + std::to_string(o.ranks_per_node) + " must be >= 1");
  model::MeshBlock m;
  m.s = p.s;
  m.b = p.b;
  m.h = p.h;
  m.a = p.a;
  m.n_kv = p.kv;
  m.d_ff = p.d_ff > 0 ? p.d_ff : 4 * p.h;
  m.T = p.t;
  m.C = p.n_c;
  m.D = o.dp;
  const CpChoice cp = parse_cp_method(o.cp_method);
  m.cp = cp.method;
  m.u = cp.method == CpMethod::ulysses ? m.C : cp.u;
  m.experts = p.experts;
  m.k = p.k;
  m.swiglu = p.swiglu;
  m.e = e;
  m.e_grad = e_grad;
  const model::Cluster cl{o.ranks_per_node,
                          model::same_rates({p.bw, o.lat}),
                          model::same_rates({o.bw_inter, o.lat_inter}),
                          p.flops,
                          p.flops,
                          p.flops_bwd.value_or(p.flops)};
  const bool bwd = o.backward;
  std::printf(
      "Composed block on a mesh (s=%g b=%g h=%g a=%g n_kv=%g d_ff=%g, T=%d C=%d D=%d, %s, "
      "CP %s%s)\n",
      p.s, p.b, p.h, p.a, p.kv, m.d_ff, m.T, m.C, m.D, p.dtype.c_str(), o.cp_method.c_str(),
      m.experts > 0 ? ", MoE" : "");
  for (const std::string& text : split_list(o.order, '/')) {
    MeshShape shape;
    shape.tp = m.T;
    shape.cp = m.C;
    shape.dp = m.D;
    shape.ep = o.ep;
    shape.order = parse_mesh_order(text);
    const MeshLayout layout(shape, m.T * m.C * m.D);
    m.E = m.experts > 0 ? layout.ep() : 1;
    if (m.experts > 0 && m.experts % m.E != 0)
      throw UsageError("--experts " + std::to_string(m.experts) + " is not divisible by --ep " +
                       std::to_string(m.E));
    const model::MeshStep st = model::mesh_step(m, layout, cl, bwd, p.causal);
    std::printf("  -- order %s (%d ranks per node; %s)\n", text.c_str(), o.ranks_per_node,
                bwd ? "training step" : "forward");
    line("TP bytes per rank", st.tp.bytes, "B");
    line("CP bytes per rank", st.cp.bytes, "B");
    line("EP bytes per rank (uniform routing)", st.ep.bytes, "B");
    line("gradient sums' bytes per rank (DP x CP, expert copies)", st.dp.bytes, "B");
    line("activation ledger per rank (the layer's)", model::mesh_ledger_bytes(m), "B");
    line("weights per rank (dense + experts)",
         (model::mesh_dense_params(m) + model::mesh_expert_params(m)) * e, "B");
    line("compute (GEMMs and attention at F, F_b)", st.compute, "s");
    for (const auto& [name, t] : {std::pair<const char*, const model::AxisTime&>{"TP", st.tp},
                                  {"CP", st.cp},
                                  {"EP", st.ep},
                                  {"DP", st.dp}}) {
      const std::string what = std::string(name) + " time / exposed (" +
                               (t.across ? "across nodes" : "inside a node") + ")";
      std::printf("  %-52s %16.6g / %.6g s\n", what.c_str(), t.time, t.exposed);
    }
    line("step", st.step, "s");
    std::printf(
        "prediction: section=mesh order=%s step_s=%.6g compute_s=%.6g tp_s=%.6g cp_s=%.6g "
        "ep_s=%.6g dp_s=%.6g tp_bytes=%.6g cp_bytes=%.6g ep_bytes=%.6g dp_bytes=%.6g\n",
        text.c_str(), st.step, st.compute, st.tp.exposed, st.cp.exposed, st.ep.exposed,
        st.dp.exposed, st.tp.bytes, st.cp.bytes, st.ep.bytes, st.dp.bytes);
  }
}

}  // namespace suite::model_cli

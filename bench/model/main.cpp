// model: prints what METHODS.md predicts for parameters and rates the user gives, so a run
// can be planned (block sizes, degrees, bytes) before a job is submitted. No MPI needed.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/model/formula_sections.hpp"
#include "bench/model/model_flags.hpp"
#include "bench/model/pipeline_section.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"
#include "kernels/core/dtype.hpp"

namespace {

using suite::model_cli::ModelFlags;

// Bytes per element of --dtype and of --grad-dtype (the ring's travelling dK/dV sums).
struct Sizes {
  double e, e_grad;
};

void print_varlen(ModelFlags& f, const Sizes& z) {
  const suite::model_cli::Params& p = f.p;
  f.varlen.cp = f.cp_sweep.empty() ? std::vector<int>{p.n_c}
                                   : suite::parse_int_list("--cp-sweep", f.cp_sweep, 1);
  if (f.varlen.docs.empty()) throw suite::UsageError("--section varlen needs --docs");
  if (!f.tokens_per_rank.empty()) {
    f.varlen.tokens_per_rank = suite::parse_scaled_int(f.tokens_per_rank);
    if (f.varlen.tokens_per_rank < 1)
      throw suite::UsageError("--tokens-per-rank " + f.tokens_per_rank + " must be >= 1");
  }
  f.varlen.layouts = suite::split_list(f.layouts);
  f.varlen.s = p.s;
  f.varlen.u = p.u;
  f.varlen.causal = p.causal;
  f.varlen.h = p.h;
  f.varlen.g = p.a / p.kv;
  f.varlen.e = z.e;
  f.varlen.b = p.b;
  f.varlen.flops = p.flops;
  f.varlen.bw = p.bw;
  suite::model_cli::print_varlen(f.varlen);
}

void print_plan(ModelFlags& f, const Sizes& z) {
  if (f.experts_opt->count() == 0) f.p.experts = 0;  // a dense model
  f.mesh_plan.ranks_per_node = f.mesh.ranks_per_node;
  f.mesh_plan.bw_inter = f.mesh.bw_inter;
  f.mesh_plan.lat = f.mesh.lat;
  f.mesh_plan.lat_inter = f.mesh.lat_inter;
  if (f.schedule_opt->count() > 0) f.mesh_plan.schedules = f.schedule.schedules;
  f.mesh_plan.chunks = f.schedule.chunks;
  suite::model_cli::print_plan(f.p, f.mesh_plan, f.p.dtype, z.e, z.e_grad);
}

void print_mesh(ModelFlags& f, const Sizes& z) {
  if (f.experts_opt->count() == 0) f.p.experts = 0;  // a dense block
  f.mesh.ep = f.ep_opt->count() > 0 ? f.p.n_e : 0;
  suite::model_cli::print_mesh(f.p, f.mesh, z.e, z.e_grad);
}

// The sections "all" prints: each one's formulas, then (after one "Planning:" header) each
// one's planning times.
struct FormulaSection {
  const char* name;
  std::function<void(const suite::model_cli::Params&, const Sizes&)> formulas;
  void (*plan)(const suite::plan::Inputs&);
};

const std::vector<FormulaSection>& formula_sections() {
  namespace mc = suite::model_cli;
  using P = const mc::Params&;
  static const std::vector<FormulaSection> sections = {
      {"sp", [](P p, const Sizes& z) { mc::print_sp(p, z.e); }, suite::plan::print_sp_plan},
      {"ring",
       [](P p, const Sizes& z) { mc::print_ring(p, z.e, z.e_grad, p.flops_bwd.value_or(p.flops)); },
       suite::plan::print_ring_plan},
      {"ulysses", [](P p, const Sizes& z) { mc::print_ulysses(p, z.e, z.e_grad); },
       suite::plan::print_ulysses_plan},
      {"moe", [](P p, const Sizes& z) { mc::print_moe(p, z.e); }, suite::plan::print_moe_plan},
  };
  return sections;
}

// The sections printed alone (not in "all"); each refuses what it cannot print with UsageError.
const std::vector<std::pair<const char*, void (*)(ModelFlags&, const Sizes&)>>& own_sections() {
  static const std::vector<std::pair<const char*, void (*)(ModelFlags&, const Sizes&)>> sections = {
      {"varlen", print_varlen},
      {"tp_overlap",
       [](ModelFlags& f, const Sizes& z) { suite::model_cli::print_tp_overlap(f.p, z.e); }},
      {"plan", print_plan},
      {"mesh", print_mesh},
      {"pipeline",
       [](ModelFlags& f, const Sizes&) { suite::model_cli::print_pipeline(f.schedule); }}};
  return sections;
}

}  // namespace

int main(int argc, char** argv) {
  ModelFlags f;
  CLI::App app(
      "Prints the METHODS.md predictions for the given sizes and rates (no run needed).\n"
      "Sizes no run could have are refused with exit status 2, by the rules of the sections\n"
      "printed: h % a, a % n_kv (ring, ulysses), a % t, d_ff % t, s % t (sp), s % N_c and,\n"
      "with --causal, s % 2N_c (ring), s % N_c and a % N_c (ulysses; a hybrid: N_c % u and\n"
      "a % u), E % N_e and k <= E (moe); so are rates <= 0 and unknown flags or values.\n"
      "sp, ring and ulysses also print the backward pass and the training step (fwd+bwd).",
      "model");
  suite::model_cli::add_model_flags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0 with the help text; a bad flag or value is refused like the benchmarks
    // refuse theirs and like impossible sizes below: one line, exit status 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: model: %s\n", e.what());
    return 2;
  }
  if (f.flops_bwd_opt->count() > 0) f.p.flops_bwd = f.flops_bwd;
  // Sizes that no run could have (METHODS.md's divisibility rules): one message, exit 2.
  if (const std::string why = suite::model_cli::params_error(f.p, f.section); !why.empty()) {
    std::fprintf(stderr, "error: model: %s\n", why.c_str());
    return 2;
  }
  const Sizes z{static_cast<double>(suite::dtype_size(*suite::parse_dtype(f.p.dtype))),
                static_cast<double>(suite::dtype_size(*suite::parse_dtype(f.p.grad_dtype)))};
  for (const auto& [name, print] : own_sections()) {
    if (f.section != name) continue;
    try {
      print(f, z);
    } catch (const suite::UsageError& err) {
      std::fprintf(stderr, "error: model: %s\n", err.what());
      return 2;
    }
    return 0;
  }
  const bool all = f.section == "all";
  for (const FormulaSection& s : formula_sections())
    if (all || f.section == s.name) s.formulas(f.p, z);
  const auto plan = suite::model_cli::plan_inputs(f.p, z.e, z.e_grad);
  std::printf("\nPlanning: times at F, F_b and W, totals over L layers\n");
  for (const FormulaSection& s : formula_sections())
    if (all || f.section == s.name) s.plan(plan);
  return 0;
}

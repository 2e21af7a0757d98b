// The one main() every benchmark executable goes through: shared flags, validation agreed on
// by all ranks, device and transport set-up, the results file, Google Benchmark, and exit
// codes (0 ok, 1 a correctness check failed, 2 bad input, 3 fatal error).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"
#include "common/harness/options.hpp"  // CLI::App, declared
#include "common/mesh/mesh_layout.hpp"

namespace suite {

struct BenchDefinition {
  std::string name{};         // executable and HDF5 group name
  std::string description{};  // first lines of --help
  std::vector<DType> cpu_dtypes{DType::fp32, DType::fp64};
  std::vector<DType> cuda_dtypes{DType::bf16, DType::fp32};
  // Adds the benchmark's own flags (bound to variables the other callbacks can see).
  std::function<void(CLI::App&)> add_options{};
  // Builds every case from the flags. Runs on every rank; throws UsageError on bad input.
  std::function<std::vector<CaseSpec>(BenchContext&)> make_cases{};
  // Rank 0, after the run: a readable table of the cases written.
  std::function<void(const BenchContext&, const std::vector<CaseRecord>&)> summarize{};
  // Optional: the benchmark's own mesh and axis from the flags and the job's rank count, e.g.
  // axis_mesh(MeshAxis::tp, tp, world_size, "--tp") (common/mesh/mesh_layout.hpp). ctx.comm is
  // then this rank's group along that axis (all groups run each case at once), and
  // ctx.meshes.own() the mesh; barriers, step times and checks stay job-wide. Unset: one group
  // of all ranks.
  std::function<AxisMesh(int world_size)> mesh{};
  // The benchmark's groups are laid out by --order (ctx.opts.order), as mesh's axes are: the
  // default puts each group on consecutive ranks, the method's axis last spreads it over the
  // job. Implied by `mesh`; set it where the cases make their meshes (ulysses' --cp list).
  bool axis_order = false;
};

int run_benchmark(int argc, char** argv, const BenchDefinition& def);

// BenchDefinition::make_cases for a benchmark whose flags expand into configs, one case each:
// configs(flags, ctx) -> std::vector<Config>, make_case(ctx, config) -> CaseSpec.
template <class Flags, class Configs, class MakeCase>
auto case_per_config(const Flags& flags, Configs configs, MakeCase make_case) {
  return [&flags, configs, make_case](BenchContext& ctx) {
    std::vector<CaseSpec> specs;
    for (const auto& config : configs(flags, ctx))
      specs.push_back(make_case(ctx, config));
    return specs;
  };
}

}  // namespace suite

// ulysses: DeepSpeed-Ulysses all-to-all attention and Ulysses x ring hybrids (METHODS.md
// section 3), side by side with plain ring attention on the same inputs.
#include <CLI/CLI.hpp>

#include "bench/ulysses/ulysses_cases.hpp"
#include "bench/ulysses/ulysses_flags.hpp"
#include "common/harness/bench_main.hpp"

namespace {

const char* const kDescription =
    "DeepSpeed-Ulysses: Q, K, V sharded along the sequence switch to head sharding by one\n"
    "all-to-all, attention runs over the whole sequence for a/u heads, and a second all-to-all\n"
    "brings the output back. Hybrids (--ulysses-degree u < N_c): Ulysses inside groups of u\n"
    "consecutive ranks, ring attention across the N_c/u groups; u = 1 is plain ring attention,\n"
    "so a sweep over u compares the three on the same inputs. Per case: time of packing, each\n"
    "all-to-all, attention (with the ring part) and unpacking; bytes per rank of each part\n"
    "against METHODS.md; a2a algbw/busbw; the output checked against full attention.\n"
    "--pass fwd_bwd adds the backward: dO's all-to-all, attention backward (hybrids: the\n"
    "ring's), dQ, dK, dV back.";

}  // namespace

int main(int argc, char** argv) {
  suite::ulysses::UlyssesFlags o;
  return suite::run_benchmark(
      argc, argv,
      {.name = "ulysses",
       .description = kDescription,
       .add_options = [&](CLI::App& app) { suite::ulysses::add_ulysses_flags(app, o); },
       .make_cases =
           [&](suite::BenchContext& ctx) {
             return suite::ulysses::ulysses_cases(ctx, suite::ulysses::ulysses_sweep(o, ctx.dtype));
           },
       .summarize =
           [](const suite::BenchContext&, const std::vector<suite::CaseRecord>& records) {
             suite::ulysses::print_ulysses_table(records);
           },
       .axis_order = true});
}

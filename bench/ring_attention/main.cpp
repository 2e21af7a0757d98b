// ring_attention: context parallelism by ring attention (METHODS.md section 2).
#include <CLI/CLI.hpp>

#include "bench/ring_attention/ring_cases.hpp"
#include "bench/ring_attention/ring_flags.hpp"
#include "common/harness/bench_main.hpp"
#include "common/sim/sim.hpp"

namespace {

const char* const kDescription =
    "Ring attention (context parallelism): each rank holds c tokens of Q, K, V; K/V blocks "
    "travel\n"
    "around the ring (double-buffered, overlapped with attention), partial results merge "
    "exactly\n"
    "by log-sum-exp. Each case runs overlapped, compute only and transfer only, so F (attention\n"
    "FLOP/s) and W (ring bytes/s) are measured in the same run, and reports c* = F/(gW) (x2 "
    "causal\n"
    "balanced, x e/2) beside the block size, per-rank per-round work / compute / transfer / "
    "idle,\n"
    "bytes per rank against (N_c-1) 4ch/g, memory against six blocks, and checks the output\n"
    "against full attention over the whole sequence.";

}  // namespace

int main(int argc, char** argv) {
  suite::ring::RingFlags o;
  return suite::run_benchmark(
      argc, argv,
      {.name = "ring_attention",
       .description = kDescription,
       .add_options = [&](CLI::App& app) { suite::ring::add_ring_flags(app, o); },
       .make_cases =
           [&](suite::BenchContext& ctx) {
             return suite::ring::ring_cases(ctx, suite::ring::ring_sweep(o, ctx.dtype));
           },
       .summarize =
           [](const suite::BenchContext& ctx, const std::vector<suite::CaseRecord>& records) {
             // A real link (shaped_link.py, emulated_cluster.py): the transfers are not shared
             // memory's.
             const bool shaped =
                 ctx.opts.link.rfind("shaped", 0) == 0 || ctx.opts.link.rfind("emulated", 0) == 0;
             suite::ring::print_ring_table(
                 records, ctx.backend == suite::Backend::cpu && !suite::sim::kSmpiBuild && !shaped);
           },
       .mesh =
           [&](int world) { return suite::axis_mesh(suite::MeshAxis::cp, o.cp, world, "--cp"); }});
}

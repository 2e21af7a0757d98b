#include "common/harness/options.hpp"

#include <cstdlib>

#include <CLI/CLI.hpp>

#include "common/harness/errors.hpp"
#include "common/harness/shared_flags.hpp"

namespace suite {

void add_common_options(CLI::App& app, CommonOptions& o) {
  app.add_option("--backend", o.backend,
                 "Where compute and buffers live: cpu, cuda, or auto (cuda when a GPU is visible)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--transport", o.transport,
                 "How ranks talk: mpi or nccl; auto = nccl on cuda, mpi on cpu. NCCL needs one GPU "
                 "per rank")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}))
      ->capture_default_str();
  app.add_option(
         "--dtype", o.dtype,
         "Element type: fp32, fp64 (cpu) or bf16, fp32 (cuda); auto = bf16 on cuda, fp32 on cpu")
      ->check(CLI::IsMember({"auto", "fp32", "fp64", "bf16"}))
      ->capture_default_str();
  app.add_option("--iters", o.iters,
                 "Timed iterations per case (every rank runs exactly this many)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed warm-up iterations before the timed ones")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--out", o.out, "Results file (HDF5); default results/<bench>_<UTC time>.h5");
  add_seed_flag(app, o.seed);
  app.add_option("--check", o.check, "1: verify every case's result against a reference; 0: skip")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s,
                 "Seconds without progress before the job is aborted; each rank prints what it was "
                 "doing (the stuck one is not 'waiting for the other ranks'); 0 = off")
      ->check(CLI::Range(0.0, 1e9))  // also refuses nan, which would silently disable it
      ->capture_default_str();
  // Under scripts/envs/shaped_link.py or emulated_cluster.py the label of the link they built.
  if (const char* label = std::getenv("SUITE_LINK_LABEL"); label && *label) o.link = label;
  app.add_option("--link", o.link,
                 "Free-form label of the interconnect (nvlink, ib-400g...), stored with results; "
                 "default: SUITE_LINK_LABEL where set (the shaped and emulated links set it)")
      ->capture_default_str();
  app.add_flag(
      "--save-tensors", o.save_tensors,
      "Store inputs and outputs of small cases in the results file (up to 1M elements per "
      "rank; sp_tp's layer also stores its weights whole); a --pass fwd_bwd case adds the "
      "output gradient it was fed and the gradients (the layer: the input's and every "
      "weight's; ring_attention and ulysses: dO, dQ, dK, dV in global token order; moe: see "
      "its description)");
}

SplitArgs split_benchmark_flags(int argc, char** argv) {
  SplitArgs out;
  out.ours.push_back(argv[0]);
  out.benchmark.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--benchmark_", 0) == 0) {
      // Interleaving shuffles case order per process: ranks would run different cases.
      const bool turned_off = a.ends_with("=false") || a.ends_with("=0");
      if (a.rfind("--benchmark_enable_random_interleaving", 0) == 0 && !turned_off)
        throw UsageError(
            a + " would run cases in a different order on each rank; not supported under MPI");
      if (a.rfind("--benchmark_min_time", 0) == 0 || a.rfind("--benchmark_min_warmup_time", 0) == 0)
        throw UsageError(
            a +
            ": iteration counts are fixed so all ranks run the same loop; use --iters/--warmup");
      out.benchmark.push_back(a);
    } else {
      out.ours.push_back(a);
    }
  }
  return out;
}

std::string common_help_footer() {
  return "\nSweeps: a list 'a,b,c' or a range 'begin:end:xFACTOR' (or ':+STEP'); numbers take K, "
         "M, G\n"
         "(powers of 1024), e.g. --sizes 1K:64M:x4.\n"
         "Google Benchmark flags pass through, e.g. --benchmark_filter=REGEX, "
         "--benchmark_repetitions=N,\n"
         "--benchmark_format=json, --benchmark_out=FILE; random interleaving and min_time are "
         "refused\n"
         "because every rank must run the same loop.\n"
         "Every case's step time is the max over ranks of each iteration; results go to the HDF5 "
         "file\n"
         "(docs/RESULTS_SCHEMA.md) with the METHODS.md prediction beside each measurement.\n";
}

}  // namespace suite

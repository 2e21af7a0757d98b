#include "common/results/run_info.hpp"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/device/cpu_info.hpp"
#include "common/harness/errors.hpp"
#include "common/results/version.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/comm.hpp"
#include "common/transport/mpi_env.hpp"
#include "kernels/core/blas_cpu.hpp"
#if defined(SUITE_HAVE_CUDA)
#include "kernels/gemm/gemm_lt.hpp"
#endif
#if defined(SUITE_HAVE_CUDNN)
#include <cudnn.h>

#include "kernels/attention/cudnn_support.hpp"
#endif

namespace suite {
namespace {

std::string join_distinct(const std::vector<std::string>& items) {
  std::set<std::string> seen;
  std::string out;
  for (const auto& s : items)
    if (seen.insert(s).second) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::int64_t count_distinct(const std::vector<std::string>& items) {
  return static_cast<std::int64_t>(std::set<std::string>(items.begin(), items.end()).size());
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string none_if_empty(const std::string& s) {
  return s.empty() ? "none" : s;
}

// The cuBLAS release behind the layer, MoE and kernel_bench GEMMs on the GPU; on the CPU
// backend the BLAS they run on (OpenBLAS, its core and threads).
std::string gemm_library_version(bool cuda) {
  if (!cuda) return kernels::cpu::blas_library_version();
#if defined(SUITE_HAVE_CUDA)
  return kernels::cuda::GemmLt::library_version();
#else
  return "none";
#endif
}

// The OpenBLAS core the CPU backend's GEMMs ran on ("SkylakeX"); on the GPU they run on
// cuBLAS, which has none.
std::string blas_core(bool cuda) {
  return cuda ? std::string("none") : kernels::cpu::blas_core();
}

// The NVIDIA driver the GPU backend ran on ("550.54.15").
std::string gpu_driver(bool cuda) {
  if (!cuda) return "none";
  std::ifstream in("/proc/driver/nvidia/version");
  std::ostringstream text;
  text << in.rdbuf();
  return nvidia_driver_from(text.str());
}

// The cuDNN library loaded at run time ("9.19.0"), where the build has cuDNN's attention.
std::string cudnn_version([[maybe_unused]] bool cuda) {
#if defined(SUITE_HAVE_CUDNN)
  if (cuda) return kernels::cudnn_version_text(static_cast<std::int64_t>(cudnnGetVersion()));
#endif
  return "none";
}

// What every results file records whatever ran: the build, the run, the libraries of the
// backend, and where the job ran and how its links were set up (Slurm,
// slurm/link_presets.json).
Attributes provenance_attrs(const std::string& bench, const std::string& command_line, bool cuda) {
  return {
      {"suite_version", std::string(kSuiteVersion)},
      {"git_commit", std::string(kGitCommit)},
      {"created_utc", utc_now_iso()},
      {"command_line", command_line},
      {"bench", bench},
      {"cuda_version", cuda ? cuda_runtime_version() : std::string("none")},
      {"gpu_driver", gpu_driver(cuda)},
      {"cudnn_version", cudnn_version(cuda)},
      {"gemm_library", gemm_library_version(cuda)},
      {"blas_core", blas_core(cuda)},
      // The host CPU also where the devices are GPUs (rank 0's host): the run's page shows it.
      {"cpu_model", cpu_device_name()},
      {"cpu_flags", cpu_isa_flags(cpu_flags())},
      {"slurm_job_id", env_or_empty("SLURM_JOB_ID")},
      {"slurm_nodelist", env_or_empty("SLURM_JOB_NODELIST")},
      {"slurm_array_task", env_or_empty("SLURM_ARRAY_TASK_ID")},
      {"link_env", none_if_empty(env_or_empty("SUITE_LINK_ENV"))},
  };
}

// The benchmark's process groups: group_size ranks each, group_count of them, on consecutive
// ranks or spread over the job by --order.
Attributes group_attrs(std::int64_t group_size, std::int64_t group_count, std::string layout) {
  return {{"group_size", group_size}, {"group_count", group_count}, {"group_layout", layout}};
}

void append(Attributes& to, Attributes more) {
  for (auto& attr : more)
    to.push_back(std::move(attr));
}

// Hardware threads this rank may run on (its CPU affinity: a cpuset or a binding), as a
// bitmask of words.
std::vector<std::uint64_t> affinity_mask() {
  std::vector<std::uint64_t> mask(CPU_SETSIZE / 64, 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n && i < CPU_SETSIZE; ++i)
      CPU_SET(i, &set);
  }
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) mask[i / 64] |= std::uint64_t{1} << (i % 64);
  return mask;
}

// Ranks on the busiest host against the hardware threads its ranks may use between them (the
// union of their CPU affinities): more ranks than threads (oversubscribed) makes waiting ranks
// compete with computing ones, so the plots and summaries flag it (collective).
Attributes placement_attrs() {
  MPI_Comm host;
  SUITE_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int on_host = 0;
  SUITE_MPI_CHECK(MPI_Comm_size(host, &on_host));
  std::vector<std::uint64_t> mask = affinity_mask();
  SUITE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, mask.data(), static_cast<int>(mask.size()),
                                MPI_UINT64_T, MPI_BOR, host));
  SUITE_MPI_CHECK(MPI_Comm_free(&host));
  std::int64_t threads = 0;
  for (std::uint64_t word : mask)
    threads += std::popcount(word);
  const std::vector<std::int64_t> worst =
      all_reduce_max({on_host, -threads, on_host > threads ? 1 : 0});
  return {{"ranks_per_host_max", worst[0]},
          {"cpu_threads_per_host_min", -worst[1]},
          {"oversubscribed", worst[2]}};
}

}  // namespace

std::string nvidia_driver_from(const std::string& proc_text) {
  std::istringstream lines(proc_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("NVRM version:", 0) != 0) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      const bool version = w.find('.') != std::string::npos &&
                           w.find_first_not_of("0123456789.") == std::string::npos;
      if (version) return w;
    }
  }
  return "unknown";
}

std::string utc_now_iso() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string default_results_path(const std::string& bench) {
  std::string t = utc_now_iso();
  t.erase(std::remove(t.begin(), t.end(), ':'), t.end());
  t.erase(std::remove(t.begin(), t.end(), '-'), t.end());
  return "results/" + bench + "_" + t + ".h5";
}

RunInfo single_process_run_info(const std::string& bench, const std::string& command_line,
                                const std::string& backend, const std::string& device_name) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  RunInfo info;
  info.rank_hosts = {host};
  info.rank_devices = {device_name};
  info.attrs = provenance_attrs(bench, command_line, backend == "cuda");
  append(info.attrs, {
                         {"world_size", std::int64_t{1}},
                         {"hostnames", std::string(host)},
                         {"node_count", std::int64_t{1}},
                         {"backend", backend},
                         {"transport", std::string("none")},
                         {"transport_detail", std::string("one process")},
                         {"link", std::string("none")},
                         {"dtype", std::string("per case")},
                         {"mpi_version", std::string("none")},
                         {"nccl_version", std::string("none")},
                         {"device_names", device_name},
                     });
  append(info.attrs, group_attrs(1, 1, "consecutive"));
  return info;
}

RunInfo collect_run_info(const BenchContext& ctx, const std::string& command_line) {
  RunInfo info;
  // Rank 0 writes them (and the attributes below from them); the others keep none.
  info.rank_hosts = gather_strings(ctx.mpi.hostname());
  info.rank_devices = gather_strings(ctx.device.name());
  info.attrs = provenance_attrs(ctx.bench, command_line, ctx.backend == Backend::cuda);
  append(info.attrs,
         {
             {"world_size", std::int64_t{ctx.mpi.size()}},
             {"hostnames", join_distinct(info.rank_hosts)},
             {"node_count", count_distinct(info.rank_hosts)},
             {"backend", std::string(backend_name(ctx.backend))},
             {"transport", std::string(transport_name(ctx.comm.transport()))},
             {"transport_detail", ctx.comm.detail()},
             {"link", ctx.opts.link},
             {"dtype", std::string(dtype_name(ctx.dtype))},
             {"mpi_version", ctx.mpi.library_version()},
             {"nccl_version",
              ctx.comm.transport() == Transport::nccl ? nccl_version() : std::string("none")},
             {"device_names", join_distinct(info.rank_devices)},
             // What reproduces the inputs (routing, skew, tensors) and how the run was guarded.
             {"seed", static_cast<std::int64_t>(ctx.opts.seed)},
             {"check", std::int64_t{ctx.opts.check}},
             {"timeout_s", ctx.opts.timeout_s},
         });
  bool consecutive = true;
  for (int r = 1; r < ctx.comm.size(); ++r)
    consecutive = consecutive && ctx.comm.world_rank(r) == ctx.comm.world_rank(0) + r;
  append(info.attrs, group_attrs(ctx.comm.size(), ctx.mpi.size() / ctx.comm.size(),
                                 consecutive ? "consecutive" : "order " + ctx.opts.order));
  append(info.attrs, placement_attrs());
  append(info.attrs, sim::run_attrs());  // simulated runs only (SMPI build)
  return info;
}

}  // namespace suite

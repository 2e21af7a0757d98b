#include "kernels/core/blas_cpu_core.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <vector>

namespace suite::kernels::cpu {
namespace {

using Release = std::array<int, 3>;  // major, minor, patch

// A core OpenBLAS's dynamic x86 build can be told to run, newest first: the instructions its
// kernels use (Linux's /proc/cpuinfo names) and the first release whose OPENBLAS_CORETYPE
// accepts its name (0.3.13 to 0.3.21 list Cooperlake but refuse it; SapphireRapids, 0.3.24
// on, is listed and refused through 0.3.28, so it is not offered).
struct Core {
  const char* name;
  int level;
  std::vector<std::string> flags;
  Release since;
};

const std::vector<Core>& ladder() {
  static const std::vector<Core> cores = {
      {"Cooperlake",
       6,
       {"avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"},
       {0, 3, 22}},
      {"SkylakeX",
       5,
       {"avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
       {0, 3, 0}},
      {"Haswell", 4, {"avx2", "fma"}, {0, 3, 0}},
      {"Sandybridge", 3, {"avx"}, {0, 3, 0}},
      {"Nehalem", 2, {"sse4_2"}, {0, 3, 0}},
      {"Core2", 1, {"ssse3"}, {0, 3, 0}},
      {"Prescott", 0, {"pni"}, {0, 3, 0}},  // pni: SSE3
  };
  return cores;
}

// Every x86 core openblas_get_corename() may report, by the newest ladder core whose
// instructions it uses: AMD's and the older Intel names rank beside the Intel core of their
// instruction set, so a library that picked Zen on a Zen 2 is left alone.
int level_of(const std::string& core) {
  for (const Core& c : ladder())
    if (core == c.name) return c.level;
  static const std::map<std::string, int> others = {
      {"SapphireRapids", 7}, {"Zen", 4},       {"Excavator", 3},    {"Steamroller", 3},
      {"Piledriver", 3},     {"Bulldozer", 3}, {"Penryn", 1},       {"Dunnington", 1},
      {"Atom", 1},           {"Barcelona", 0}, {"Opteron_SSE3", 0}, {"Opteron", 0},
      {"Nano", 0},           {"Bobcat", 1},
  };
  auto it = others.find(core);
  return it == others.end() ? -1 : it->second;
}

// "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> {0, 3, 21}; nullopt for any other text.
std::optional<Release> release_of(const std::string& config) {
  Release r{};
  int used = 0;
  if (std::sscanf(config.c_str(), "OpenBLAS %d.%d.%d%n", &r[0], &r[1], &r[2], &used) != 3 ||
      used == 0)
    return std::nullopt;
  return r;
}

}  // namespace

std::string openblas_core_for(const std::set<std::string>& cpu_flags,
                              const std::string& openblas_config) {
  const auto release = release_of(openblas_config);
  if (!release || openblas_config.find("DYNAMIC_ARCH") == std::string::npos) return "";
  for (const Core& c : ladder()) {
    const bool has_all = std::all_of(c.flags.begin(), c.flags.end(),
                                     [&](const std::string& f) { return cpu_flags.count(f) > 0; });
    if (has_all && *release >= c.since) return c.name;
  }
  return "";
}

std::optional<std::string> better_openblas_core(const std::string& running,
                                                const std::set<std::string>& cpu_flags,
                                                const std::string& openblas_config) {
  const int now = level_of(running);
  const std::string best = openblas_core_for(cpu_flags, openblas_config);
  if (now < 0 || best.empty() || level_of(best) <= now) return std::nullopt;
  return best;
}

}  // namespace suite::kernels::cpu

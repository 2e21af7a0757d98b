#include "kernels/core/blas_cpu_rerun.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "kernels/core/blas_cpu.hpp"
#include "kernels/core/blas_cpu_core.hpp"

namespace suite::kernels::cpu {
namespace {

constexpr const char* kCoreType = "OPENBLAS_CORETYPE";
constexpr const char* kKeep = "SUITE_KEEP_BLAS_CORE";
// The core OpenBLAS picked before the restart, for the note.
constexpr const char* kPicked = "SUITE_BLAS_CORE_PICKED";

bool set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace

void rerun_on_cpu_blas_core(char** argv, const std::set<std::string>& cpu_flags) {
  if (std::getenv(kCoreType) != nullptr || set(kKeep)) return;
  const std::string running = blas_core();
  const auto better = better_openblas_core(running, cpu_flags, blas_config());
  if (!better) return;
  setenv(kPicked, running.c_str(), 1);
  setenv(kCoreType, better->c_str(), 1);
  execv("/proc/self/exe", argv);
  // Not restarted (no /proc): run on the core the library picked, and say nothing of another.
  unsetenv(kCoreType);
  unsetenv(kPicked);
}

std::optional<std::string> blas_core_note() {
  const char* picked = std::getenv(kPicked);
  const char* forced = std::getenv(kCoreType);
  if (picked == nullptr || forced == nullptr || blas_core() != forced) return std::nullopt;
  return blas_release() + " picked " + picked + " for this CPU; running its " + forced +
         " kernels (" + kCoreType + "=" + forced + "; " + kKeep + "=1 keeps " + picked + ")";
}

}  // namespace suite::kernels::cpu

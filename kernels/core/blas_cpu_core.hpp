// Which of OpenBLAS's x86 kernel sets ("cores") a CPU can run, from the CPU's flags as
// /proc/cpuinfo lists them. A DYNAMIC_ARCH OpenBLAS picks its core from the CPU's family and
// model, and a release older than the CPU falls back to its oldest x86-64 core (Debian 12's
// 0.3.21 runs Prescott on Emerald Rapids, a fifth of SkylakeX's SGEMM rate); the flags tell
// what the CPU can run whatever its model. Pure: no OpenBLAS call, no CPU query.
#pragma once

#include <optional>
#include <set>
#include <string>

namespace suite::kernels::cpu {

// The newest core whose instructions are all among `cpu_flags` and that the library described
// by `openblas_config` (openblas_get_config()'s text, "OpenBLAS 0.3.21 DYNAMIC_ARCH ...")
// accepts as OPENBLAS_CORETYPE. Empty where there is none: a library built for one core (no
// DYNAMIC_ARCH), a version it cannot read, a CPU without x86's SSE3.
std::string openblas_core_for(const std::set<std::string>& cpu_flags,
                              const std::string& openblas_config);

// The core to run instead of `running` (openblas_get_corename()): openblas_core_for's, where
// it is newer than `running`. nullopt where `running` is as new, or is a core this list does
// not rank (every non-x86 core).
std::optional<std::string> better_openblas_core(const std::string& running,
                                                const std::set<std::string>& cpu_flags,
                                                const std::string& openblas_config);

}  // namespace suite::kernels::cpu

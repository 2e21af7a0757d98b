// Runs an executable on the OpenBLAS kernels its CPU can run. OpenBLAS reads OPENBLAS_CORETYPE
// once, when the library loads (before main), so a process whose library picked a core older
// than the CPU's (blas_cpu_core.hpp) starts itself again with the variable set: first thing in
// main, before MPI_Init and before any BLAS call. Not where OPENBLAS_CORETYPE is already set
// (the user's choice, or the run already restarted), nor with SUITE_KEEP_BLAS_CORE=1.
#pragma once

#include <optional>
#include <set>
#include <string>

namespace suite::kernels::cpu {

// Returns where the core is kept; otherwise replaces the process (execv of /proc/self/exe with
// the same arguments and environment plus OPENBLAS_CORETYPE), and returns only if that fails.
// `argv` is main's, null-terminated; `cpu_flags` the CPU's (cpu_flags()).
void rerun_on_cpu_blas_core(char** argv, const std::set<std::string>& cpu_flags);

// In a process so restarted, the line that says so ("OpenBLAS 0.3.21 picked Prescott for this
// CPU; running its SkylakeX kernels (OPENBLAS_CORETYPE=SkylakeX; SUITE_KEEP_BLAS_CORE=1 keeps
// Prescott)"); nullopt otherwise.
std::optional<std::string> blas_core_note();

}  // namespace suite::kernels::cpu

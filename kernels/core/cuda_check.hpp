// Checks for CUDA runtime and cuBLAS calls made by kernels. Kernels know nothing of MPI, so a
// failure throws; the benchmark harness turns any escaping exception into a job-wide abort
// that names the rank and host.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace suite::detail {
[[noreturn]] inline void throw_cuda(const char* expr, const char* file, int line,
                                    const char* what) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + what);
}
}  // namespace suite::detail

#define SUITE_CUDA_CHECK(expr)                                                                \
  do {                                                                                        \
    cudaError_t suite_err_ = (expr);                                                          \
    if (suite_err_ != cudaSuccess)                                                            \
      ::suite::detail::throw_cuda(#expr, __FILE__, __LINE__, cudaGetErrorString(suite_err_)); \
  } while (0)

// After a kernel launch: catches bad launch configurations at once.
#define SUITE_CUDA_CHECK_LAUNCH() SUITE_CUDA_CHECK(cudaGetLastError())

#endif

// Checks of the CUDA runtime and NCCL calls of the NCCL transports (the suite's Comm and
// pipeline's hops): a failure ends the job naming the call, with NCCL's own explanation of its
// last failure where it has one. NCCL builds only.
#pragma once

#if defined(SUITE_HAVE_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "common/harness/errors.hpp"

namespace suite {
std::string last_nccl_error();
}  // namespace suite

#define SUITE_NCCL_CHECK(expr)                                                          \
  do {                                                                                  \
    ncclResult_t suite_nr_ = (expr);                                                    \
    if (suite_nr_ != ncclSuccess)                                                       \
      ::suite::fatal(std::string(#expr) + " failed: " + ncclGetErrorString(suite_nr_) + \
                         ::suite::last_nccl_error(),                                    \
                     __FILE__, __LINE__);                                               \
  } while (0)

#define SUITE_CUDA_OK(expr)                                                                      \
  do {                                                                                           \
    cudaError_t suite_ce_ = (expr);                                                              \
    if (suite_ce_ != cudaSuccess)                                                                \
      ::suite::fatal(std::string(#expr) + " failed: " + cudaGetErrorString(suite_ce_), __FILE__, \
                     __LINE__);                                                                  \
  } while (0)

#endif

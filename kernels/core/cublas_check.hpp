// Check for cuBLAS calls: same contract as SUITE_CUDA_CHECK (throws std::runtime_error naming
// file:line, the expression and cuBLAS's own status string).
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cublas_v2.h>

#include "kernels/core/cuda_check.hpp"

#define SUITE_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                  \
    cublasStatus_t suite_st_ = (expr);                                                  \
    if (suite_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::suite::detail::throw_cuda(#expr, __FILE__, __LINE__,                            \
                                  (std::string(cublasGetStatusName(suite_st_)) + " (" + \
                                   cublasGetStatusString(suite_st_) + ")")              \
                                      .c_str());                                        \
  } while (0)

#endif

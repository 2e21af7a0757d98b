// Row-major GEMM through cuBLASLt with heuristic algorithm selection and a workspace, cached
// per problem: C = alpha * op(A) * op(B) + beta * C, storage bf16 or fp32 (shared by A, B, C),
// fp32 accumulation. The first call of a shape asks cuBLASLt's heuristic for its best
// algorithm and keeps the descriptors; later calls only launch. When the heuristic returns
// nothing the call runs on plain cuBLAS (cublasGemmEx) and counts in fallbacks().
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/core/cublas_handle.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::kernels::cuda {

class GemmLt {
 public:
  // workspace_bytes: cuBLASLt's scratch (32 MiB suits Hopper; allocated on first use).
  explicit GemmLt(std::size_t workspace_bytes = 32u << 20);
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  void gemm(cudaStream_t stream, DType dtype, bool trans_a, bool trans_b, std::int64_t m,
            std::int64_t n, std::int64_t k, float alpha, const void* A, std::int64_t lda,
            const void* B, std::int64_t ldb, float beta, void* C, std::int64_t ldc);

  // Calls that ran on plain cuBLAS because cuBLASLt's heuristic found no algorithm.
  std::int64_t fallbacks() const;
  // "cublasLt 13.0.0" (the loaded library's version).
  static std::string library_version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace suite::kernels::cuda
#endif

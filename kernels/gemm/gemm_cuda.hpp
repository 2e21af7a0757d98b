// Row-major GEMM on the GPU through cuBLAS: C = alpha * op(A) * op(B) + beta * C.
// Storage bf16 or fp32 (A, B, C share it); accumulation always fp32 (CUBLAS_COMPUTE_32F).
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/cublas_handle.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::kernels::cuda {

// cuBLAS's element type for the storage type; std::invalid_argument naming `what` otherwise.
cudaDataType_t cublas_data_type(DType t, const char* what);

void gemm(CublasHandle& handle, cudaStream_t stream, DType dtype, bool trans_a, bool trans_b,
          std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const void* A,
          std::int64_t lda, const void* B, std::int64_t ldb, float beta, void* C, std::int64_t ldc);

// `batch` independent GEMMs; matrix i of X starts at X + i * stride_x elements.
void gemm_strided_batched(CublasHandle& handle, cudaStream_t stream, DType dtype, bool trans_a,
                          bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                          const void* A, std::int64_t lda, std::int64_t stride_a, const void* B,
                          std::int64_t ldb, std::int64_t stride_b, float beta, void* C,
                          std::int64_t ldc, std::int64_t stride_c, std::int64_t batch);

}  // namespace suite::kernels::cuda
#endif

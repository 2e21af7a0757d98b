// cuBLAS is column-major. A row-major matrix X (r x c, leading dim ld) is, read column-major,
// X^T (c x r, same ld). Row-major C = op(A) op(B) is therefore column-major
// C^T = op(B)^T op(A)^T: call cuBLAS with the operands swapped, m and n swapped, and each
// operand's own transpose flag unchanged.
#include "kernels/gemm/gemm_cuda.hpp"

#include <climits>
#include <stdexcept>

#include "kernels/core/cublas_check.hpp"

namespace suite::kernels::cuda {
namespace {

int narrow(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) {
    throw std::invalid_argument(std::string("cuda::gemm: ") + what + " out of cuBLAS int range");
  }
  return static_cast<int>(v);
}

cublasOperation_t op(bool trans) {
  return trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

cudaDataType_t cublas_data_type(DType t, const char* what) {
  switch (t) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::fp32:
      return CUDA_R_32F;
    default:
      throw std::invalid_argument(std::string(what) + ": storage must be bf16 or fp32");
  }
}

void gemm(CublasHandle& handle, cudaStream_t stream, DType dtype, bool trans_a, bool trans_b,
          std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const void* A,
          std::int64_t lda, const void* B, std::int64_t ldb, float beta, void* C,
          std::int64_t ldc) {
  const cudaDataType_t t = cublas_data_type(dtype, "cuda::gemm");
  if (m == 0 || n == 0) return;
  handle.set_stream(stream);
  SUITE_CUBLAS_CHECK(cublasGemmEx(handle.get(), op(trans_b), op(trans_a), narrow(n, "n"),
                                  narrow(m, "m"), narrow(k, "k"), &alpha, B, t, narrow(ldb, "ldb"),
                                  A, t, narrow(lda, "lda"), &beta, C, t, narrow(ldc, "ldc"),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_strided_batched(CublasHandle& handle, cudaStream_t stream, DType dtype, bool trans_a,
                          bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                          const void* A, std::int64_t lda, std::int64_t stride_a, const void* B,
                          std::int64_t ldb, std::int64_t stride_b, float beta, void* C,
                          std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
  const cudaDataType_t t = cublas_data_type(dtype, "cuda::gemm");
  if (m == 0 || n == 0 || batch == 0) return;
  handle.set_stream(stream);
  SUITE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle.get(), op(trans_b), op(trans_a), narrow(n, "n"), narrow(m, "m"), narrow(k, "k"),
      &alpha, B, t, narrow(ldb, "ldb"), stride_b, A, t, narrow(lda, "lda"), stride_a, &beta, C, t,
      narrow(ldc, "ldc"), stride_c, narrow(batch, "batch"), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace suite::kernels::cuda

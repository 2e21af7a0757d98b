// The CPU backend's GEMM is OpenBLAS's (through CBLAS, one thread per rank by default: see
// blas_cpu.hpp); the long-double triple loop beside it is the tests' independent reference.
#include "kernels/gemm/gemm_cpu.hpp"

#include <algorithm>
#include <stdexcept>

#include "kernels/core/blas_cpu.hpp"

namespace suite::kernels::cpu {
namespace {

// Element (i, j) of op(X) where X is row-major with leading dimension ld.
template <class T>
inline T at(const T* X, std::int64_t ld, bool trans, std::int64_t i, std::int64_t j) {
  return trans ? X[j * ld + i] : X[i * ld + j];
}

void check_args(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("gemm: negative dimension");
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B, std::int64_t ldb,
          std::type_identity_t<T> beta, T* C, std::int64_t ldc) {
  check_args(m, n, k);
  blas_gemm<T>(trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void gemm_naive(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B,
                std::int64_t ldb, std::type_identity_t<T> beta, T* C, std::int64_t ldc) {
  check_args(m, n, k);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      long double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        acc += static_cast<long double>(at(A, lda, trans_a, i, p)) * at(B, ldb, trans_b, p, j);
      }
      const long double prior =
          beta == T(0) ? 0.0L : static_cast<long double>(beta) * C[i * ldc + j];
      C[i * ldc + j] = static_cast<T>(static_cast<long double>(alpha) * acc + prior);
    }
  }
}

#define SUITE_INSTANTIATE_GEMM(T)                                                                \
  template void gemm<T>(bool, bool, std::int64_t, std::int64_t, std::int64_t, T, const T*,       \
                        std::int64_t, const T*, std::int64_t, T, T*, std::int64_t);              \
  template void gemm_naive<T>(bool, bool, std::int64_t, std::int64_t, std::int64_t, T, const T*, \
                              std::int64_t, const T*, std::int64_t, T, T*, std::int64_t);
SUITE_INSTANTIATE_GEMM(float)
SUITE_INSTANTIATE_GEMM(double)
#undef SUITE_INSTANTIATE_GEMM

}  // namespace suite::kernels::cpu

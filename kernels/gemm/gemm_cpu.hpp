// Row-major GEMM on the CPU: C = alpha * op(A) * op(B) + beta * C, with op(A) m x k and
// op(B) k x n. Leading dimensions are row strides in elements (row-major, so lda >= columns of
// A as stored). beta == 0 overwrites C without reading it (NaN in C does not leak through).
#pragma once

#include <cstdint>
#include <type_traits>

namespace suite::kernels::cpu {

// OpenBLAS (CBLAS) underneath: the CPU backend's GEMM.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B, std::int64_t ldb,
          std::type_identity_t<T> beta, T* C, std::int64_t ldc);

// Triple loop with long double accumulation: the reference the tests compare against.
template <class T>
void gemm_naive(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B,
                std::int64_t ldb, std::type_identity_t<T> beta, T* C, std::int64_t ldc);

}  // namespace suite::kernels::cpu

// The CPU backend's BLAS: OpenBLAS through CBLAS, on row-major matrices with the suite's
// conventions (leading dimensions are row strides; beta == 0 overwrites C without reading it).
// One BLAS thread per process unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says otherwise:
// the benchmarks run one MPI rank per core, and a BLAS that spawned a thread per core on every
// rank would oversubscribe the machine.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

namespace suite::kernels::cpu {

// C = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n (float or double). Empty shapes
// are fine (k == 0 scales C by beta).
template <class T>
void blas_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B,
               std::int64_t ldb, std::type_identity_t<T> beta, T* C, std::int64_t ldc);

// "OpenBLAS 0.3.21 SkylakeX, 1 thread": recorded as gemm_library on the CPU backend.
std::string blas_library_version();
// Threads the BLAS uses (after the suite's default has been applied).
int blas_threads();
// The kernel set OpenBLAS runs ("SkylakeX"): recorded as blas_core on the CPU backend.
std::string blas_core();
// openblas_get_config()'s text: "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY ...".
std::string blas_config();
// Its first two words: "OpenBLAS 0.3.21".
std::string blas_release();

}  // namespace suite::kernels::cpu

#include "kernels/core/blas_cpu.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace suite::kernels::cpu {
namespace {

// Applies the one-thread default once, before the first BLAS call.
void init_threads() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS"))
      openblas_set_num_threads(1);
  });
}

blasint to_int(std::int64_t v) {
  if (v > std::numeric_limits<blasint>::max())
    throw std::invalid_argument("gemm: dimension above the BLAS integer range");
  return static_cast<blasint>(v);
}

// BLAS wants ld >= max(1, columns as stored) even when a dimension is 0.
blasint ld_of(std::int64_t ld) {
  return to_int(std::max<std::int64_t>(ld, 1));
}

template <class T>
void scale_rows(std::int64_t m, std::int64_t n, T beta, T* C, std::int64_t ldc) {
  if (beta == T(1)) return;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
}

}  // namespace

template <class T>
void blas_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B,
               std::int64_t ldb, std::type_identity_t<T> beta, T* C, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    scale_rows(m, n, static_cast<T>(beta), C, ldc);
    return;
  }
  init_threads();
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, to_int(m), to_int(n), to_int(k), alpha, A, ld_of(lda), B,
                ld_of(ldb), beta, C, ld_of(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, to_int(m), to_int(n), to_int(k), alpha, A, ld_of(lda), B,
                ld_of(ldb), beta, C, ld_of(ldc));
  }
}

std::string blas_library_version() {
  init_threads();
  const int threads = blas_threads();
  return blas_release() + " " + blas_core() + ", " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads");
}

int blas_threads() {
  init_threads();
  return openblas_get_num_threads();
}

std::string blas_core() {
  return openblas_get_corename();
}

std::string blas_config() {
  return openblas_get_config();
}

std::string blas_release() {
  const std::string config = blas_config();
  return config.substr(0, config.find(' ', config.find(' ') + 1));
}

template void blas_gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                               const float*, std::int64_t, const float*, std::int64_t, float,
                               float*, std::int64_t);
template void blas_gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                const double*, std::int64_t, const double*, std::int64_t, double,
                                double*, std::int64_t);

}  // namespace suite::kernels::cpu

// Goto-style blocking: op(B) is packed into kc x nc panels (L2), op(A) into mc x kc panels
// (L1/L2), and an MR x NR micro-kernel keeps its C tile in registers. Packing also folds away
// the transposes, so the micro-kernel sees one layout only.
#include "kernels/gemm/gemm_cpu.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace suite::kernels::cpu {
namespace {

template <class T>
struct Tiles {
  static constexpr int MR = 4;               // rows of the register tile
  static constexpr int NR = 32 / sizeof(T);  // two 16-byte vectors per row
  static constexpr std::int64_t KC = 256;    // depth of one packed panel
  static constexpr std::int64_t MC = 128;    // rows of packed A per block
  static constexpr std::int64_t NC = 1024;   // columns of packed B per block
};

// Element (i, j) of op(X) where X is row-major with leading dimension ld.
template <class T>
inline T at(const T* X, std::int64_t ld, bool trans, std::int64_t i, std::int64_t j) {
  return trans ? X[j * ld + i] : X[i * ld + j];
}

// Packs op(A)[i0:i0+mc, p0:p0+kc] * alpha into MR-row slivers: sliver s, depth p, row r at
// ((s * kc) + p) * MR + r. Rows past m are zero so the micro-kernel never branches.
template <class T>
void pack_a(const T* A, std::int64_t lda, bool trans, std::int64_t i0, std::int64_t mc,
            std::int64_t p0, std::int64_t kc, T alpha, T* out) {
  constexpr int MR = Tiles<T>::MR;
  for (std::int64_t s = 0; s < mc; s += MR) {
    for (std::int64_t p = 0; p < kc; ++p) {
      for (int r = 0; r < MR; ++r) {
        *out++ = (s + r < mc) ? alpha * at(A, lda, trans, i0 + s + r, p0 + p) : T(0);
      }
    }
  }
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] into NR-column slivers: sliver s, depth p, column c.
template <class T>
void pack_b(const T* B, std::int64_t ldb, bool trans, std::int64_t p0, std::int64_t kc,
            std::int64_t j0, std::int64_t nc, T* out) {
  constexpr int NR = Tiles<T>::NR;
  for (std::int64_t s = 0; s < nc; s += NR) {
    for (std::int64_t p = 0; p < kc; ++p) {
      for (int c = 0; c < NR; ++c) {
        *out++ = (s + c < nc) ? at(B, ldb, trans, p0 + p, j0 + s + c) : T(0);
      }
    }
  }
}

// C[0:mr, 0:nr] += Apack sliver * Bpack sliver over depth kc. Fixed-size accumulators let the
// compiler keep the tile in vector registers; the edge tile goes through the same code.
template <class T>
void micro_kernel(std::int64_t kc, const T* __restrict a, const T* __restrict b, T* C,
                  std::int64_t ldc, int mr, int nr) {
  constexpr int MR = Tiles<T>::MR;
  constexpr int NR = Tiles<T>::NR;
  T acc[MR][NR] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    const T* bp = b + p * NR;
    const T* ap = a + p * MR;
    for (int r = 0; r < MR; ++r) {
      const T ar = ap[r];
      for (int c = 0; c < NR; ++c)
        acc[r][c] += ar * bp[c];
    }
  }
  for (int r = 0; r < mr; ++r) {
    for (int c = 0; c < nr; ++c)
      C[r * ldc + c] += acc[r][c];
  }
}

template <class T>
void scale_c(std::int64_t m, std::int64_t n, T beta, T* C, std::int64_t ldc) {
  if (beta == T(1)) return;
  for (std::int64_t i = 0; i < m; ++i) {
    T* row = C + i * ldc;
    if (beta == T(0)) {
      std::fill(row, row + n, T(0));
    } else {
      for (std::int64_t j = 0; j < n; ++j)
        row[j] *= beta;
    }
  }
}

void check_args(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("gemm: negative dimension");
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          std::type_identity_t<T> alpha, const T* A, std::int64_t lda, const T* B, std::int64_t ldb,
          std::type_identity_t<T> beta, T* C, std::int64_t ldc) {
  using TL = Tiles<T>;
  check_args(m, n, k);
  scale_c(m, n, beta, C, ldc);
  if (m == 0 || n == 0 || k == 0 || alpha == T(0)) return;

  const std::int64_t nc_max = std::min<std::int64_t>(TL::NC, n);
  const std::int64_t mc_max = std::min<std::int64_t>(TL::MC, m);
  std::vector<T> bpack(
      static_cast<std::size_t>(TL::KC * ((nc_max + TL::NR - 1) / TL::NR) * TL::NR));
  std::vector<T> apack(
      static_cast<std::size_t>(TL::KC * ((mc_max + TL::MR - 1) / TL::MR) * TL::MR));

  for (std::int64_t j0 = 0; j0 < n; j0 += TL::NC) {
    const std::int64_t nc = std::min(TL::NC, n - j0);
    for (std::int64_t p0 = 0; p0 < k; p0 += TL::KC) {
      const std::int64_t kc = std::min(TL::KC, k - p0);
      pack_b(B, ldb, trans_b, p0, kc, j0, nc, bpack.data());
      for (std::int64_t i0 = 0; i0 < m; i0 += TL::MC) {
        const std::int64_t mc = std::min(TL::MC, m - i0);
        pack_a(A, lda, trans_a, i0, mc, p0, kc, static_cast<T>(alpha), apack.data());
        for (std::int64_t jr = 0; jr < nc; jr += TL::NR) {
          const int nr = static_cast<int>(std::min<std::int64_t>(TL::NR, nc - jr));
          for (std::int64_t ir = 0; ir < mc; ir += TL::MR) {
            const int mr = static_cast<int>(std::min<std::int64_t>(TL::MR, mc - ir));
            micro_kernel<T>(kc, apack.data() + ir * kc, bpack.data() + jr * kc,
                            C + (i0 + ir) * ldc + j0 + jr, ldc, mr, nr);
          }
        }
      }
    }
  }
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

// cuBLASLt is column-major, like cuBLAS: row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so the operands are swapped (A' = B, B' = A, m' = n, n' = m) and each
// keeps its own transpose flag (see gemm_cuda.cpp).
#include "kernels/gemm/gemm_lt.hpp"

#include <cublasLt.h>

#include <map>
#include <stdexcept>
#include <tuple>

#include "kernels/core/cublas_check.hpp"
#include "kernels/core/device_buffer.hpp"
#include "kernels/gemm/gemm_cuda.hpp"

namespace suite::kernels::cuda {
namespace {

// Largest power of two (up to 256) dividing the address: cuBLASLt's heuristic must not pick a
// kernel that assumes more alignment than the operands have.
std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al != 0)
    al /= 2;
  return al;
}

// Everything the descriptors and the chosen algorithm depend on.
using Key = std::tuple<int, bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, std::int64_t, std::uint32_t, std::uint32_t, std::uint32_t>;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

struct GemmLt::Impl {
  cublasLtHandle_t lt = nullptr;
  std::size_t ws_bytes;
  DeviceBuffer workspace{0};
  CublasHandle blas;  // the fallback
  std::map<Key, std::unique_ptr<Plan>> plans;
  std::int64_t fallbacks = 0;

  explicit Impl(std::size_t ws) : ws_bytes(ws) { SUITE_CUBLAS_CHECK(cublasLtCreate(&lt)); }
  ~Impl() { cublasLtDestroy(lt); }

  const Plan& plan_for(const Key& key, DType dtype, bool ta, bool tb, std::int64_t m,
                       std::int64_t n, std::int64_t k, std::int64_t lda, std::int64_t ldb,
                       std::int64_t ldc) {
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
    if (workspace.bytes() < ws_bytes) workspace = DeviceBuffer(ws_bytes);
    auto p = std::make_unique<Plan>();
    const cudaDataType_t t = cublas_data_type(dtype, "cuda::GemmLt");
    SUITE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // Column-major view: A' = B (op tb), B' = A (op ta), C' = C^T (n x m).
    const cublasOperation_t op_a = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    SUITE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    SUITE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    // A' is n x k (stored k x n when transposed), B' is k x m (m x k), C' is n x m.
    SUITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, t, tb ? k : n, tb ? n : k, ldb));
    SUITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, t, ta ? m : k, ta ? k : m, lda));
    SUITE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, t, n, m, ldc));

    cublasLtMatmulPreference_t pref = nullptr;
    SUITE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = ws_bytes;
    const std::uint32_t al_a = std::get<10>(key), al_b = std::get<9>(key), al_c = std::get<11>(key);
    // Each setting only if the previous ones took: the first failure is kept in `st`.
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, std::size_t n) {
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, n);
    };
    set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &result,
                                          &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    // No algorithm (or a heuristic error such as NOT_SUPPORTED): plain cuBLAS for this shape.
    p->found = st == CUBLAS_STATUS_SUCCESS && returned > 0;
    if (p->found) p->algo = result.algo;
    return *plans.emplace(key, std::move(p)).first->second;
  }
};

GemmLt::GemmLt(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>(workspace_bytes)) {}
GemmLt::~GemmLt() = default;

std::int64_t GemmLt::fallbacks() const {
  return impl_->fallbacks;
}

std::string GemmLt::library_version() {
  const std::size_t v = cublasLtGetVersion();  // e.g. 130000 + minor * 100 + patch
  return "cublasLt " + std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

void GemmLt::gemm(cudaStream_t stream, DType dtype, bool trans_a, bool trans_b, std::int64_t m,
                  std::int64_t n, std::int64_t k, float alpha, const void* A, std::int64_t lda,
                  const void* B, std::int64_t ldb, float beta, void* C, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("cuda::GemmLt: negative size");
  if (k == 0) {  // C = beta C: no matmul for cuBLASLt to describe
    cuda::gemm(impl_->blas, stream, dtype, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta,
               C, ldc);
    return;
  }
  const Key key{static_cast<int>(dtype),
                trans_a,
                trans_b,
                m,
                n,
                k,
                lda,
                ldb,
                ldc,
                alignment(A),
                alignment(B),
                alignment(C)};
  const Plan& p = impl_->plan_for(key, dtype, trans_a, trans_b, m, n, k, lda, ldb, ldc);
  if (!p.found) {
    ++impl_->fallbacks;
    cuda::gemm(impl_->blas, stream, dtype, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta,
               C, ldc);
    return;
  }
  SUITE_CUBLAS_CHECK(cublasLtMatmul(impl_->lt, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c,
                                    &p.algo, impl_->workspace.get(), impl_->ws_bytes, stream));
}

}  // namespace suite::kernels::cuda

// cuBLASLt GEMM (heuristic algorithm, workspace, cached plans) against the CPU reference, for
// every transpose combination, odd sizes and strides (where the heuristic may decline and
// plain cuBLAS runs instead) and the dense, aligned shapes the layer and kernel_bench use.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/gemm/gemm_cpu.hpp"
#include "kernels/gemm/gemm_lt.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::DeviceBuffer;

// (dtype, m, n, k, trans_a, trans_b, dense): dense = leading dimensions equal to the row
// lengths (aligned); otherwise padded by odd amounts.
using LtCase = std::tuple<DType, int, int, int, bool, bool, bool>;
class GemmLtCuda : public ::testing::TestWithParam<LtCase> {};

TEST_P(GemmLtCuda, MatchesCpuReferenceTwice) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const auto [t, m, n, k, ta, tb, dense] = GetParam();
  const std::int64_t lda = (ta ? m : k) + (dense ? 0 : 2), ldb = (tb ? k : n) + (dense ? 0 : 1),
                     ldc = n + (dense ? 0 : 3);
  auto A = test::random_vector<float>((ta ? k : m) * lda, 1);
  auto B = test::random_vector<float>((tb ? n : k) * ldb, 2);
  auto C = test::random_vector<float>(m * ldc, 3);
  DeviceBuffer dA = test::upload(t, A), dB = test::upload(t, B), dC = test::upload(t, C);
  std::vector<double> ref(C.begin(), C.end()), Ad(A.begin(), A.end()), Bd(B.begin(), B.end());
  cpu::gemm_naive<double>(ta, tb, m, n, k, 0.5, Ad.data(), lda, Bd.data(), ldb, 2.0, ref.data(),
                          ldc);
  cuda::GemmLt lt;
  for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the cached plan
    DeviceBuffer dC2 = test::upload(t, C);
    lt.gemm(nullptr, t, ta, tb, m, n, k, 0.5f, dA.get(), lda, dB.get(), ldb, 2.0f, dC2.get(), ldc);
    SUITE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = test::download(t, dC2, C.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], ref[i], test::storage_eps(t) * std::abs(ref[i]) + 1e-6 * k)
          << "rep " << rep << " at " << i;
    }
  }
  // Dense bf16 / fp32 problems are cuBLASLt's bread and butter: no fallback expected.
  if (dense) {
    EXPECT_EQ(lt.fallbacks(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmLtCuda,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::fp32),
                                            ::testing::Values(1, 64), ::testing::Values(8, 136),
                                            ::testing::Values(64, 256), ::testing::Bool(),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(GemmLtCudaVersion, NamesTheLibrary) {
  SUITE_REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(cuda::GemmLt::library_version().rfind("cublasLt ", 0), 0u);
}

}  // namespace
}  // namespace suite::kernels

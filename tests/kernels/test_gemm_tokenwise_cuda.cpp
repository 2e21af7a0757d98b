// CUDA GEMM and token-wise kernels against the CPU references on the same (rounded) inputs.
// Tolerances: one rounding of the output to the storage type plus fp32 accumulation.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/gemm/gemm_cpu.hpp"
#include "kernels/gemm/gemm_cuda.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "kernels/tokenwise/tokenwise_cuda.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::DeviceBuffer;

using test::expect_close;
using test::widen;

using GemmCase = std::tuple<DType, int, int, int, bool, bool>;
class GemmCuda : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmCuda, MatchesCpuReference) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const auto [t, m, n, k, ta, tb] = GetParam();
  const std::int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
  auto A = test::random_vector<float>((ta ? k : m) * lda, 1);
  auto B = test::random_vector<float>((tb ? n : k) * ldb, 2);
  auto C = test::random_vector<float>(m * ldc, 3);
  DeviceBuffer dA = test::upload(t, A), dB = test::upload(t, B), dC = test::upload(t, C);
  cuda::CublasHandle handle;
  cuda::gemm(handle, nullptr, t, ta, tb, m, n, k, 0.5f, dA.get(), lda, dB.get(), ldb, 2.0f,
             dC.get(), ldc);
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> ref = widen(C), Ad = widen(A), Bd = widen(B);
  cpu::gemm_naive<double>(ta, tb, m, n, k, 0.5, Ad.data(), lda, Bd.data(), ldb, 2.0, ref.data(),
                          ldc);
  expect_close(test::download(t, dC, C.size()), ref, test::storage_eps(t), 1e-6 * k, "C");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmCuda,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::fp32),
                                            ::testing::Values(1, 67), ::testing::Values(5, 130),
                                            ::testing::Values(64, 257), ::testing::Bool(),
                                            ::testing::Bool()));

class TokenwiseCuda : public ::testing::TestWithParam<DType> {};

TEST_P(TokenwiseCuda, LayerNormGeluResidual) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const double eps = test::storage_eps(t);
  for (std::int64_t cols : {64, 1000, 4096}) {
    const std::int64_t rows = 7;
    auto x = test::random_vector<float>(rows * cols, cols, -2, 3);
    auto g = test::random_vector<float>(cols, 2, 0.5, 1.5);
    auto b = test::random_vector<float>(cols, 3);
    auto r = test::random_vector<float>(rows * cols, 4);
    DeviceBuffer dx = test::upload(t, x), dg = test::upload(t, g), db = test::upload(t, b),
                 dr = test::upload(t, r), dy(x.size() * dtype_size(t));
    std::vector<double> xd = widen(x), gd = widen(g), bd = widen(b), rd = widen(r), ref(x.size());

    cuda::layernorm_forward(nullptr, t, rows, cols, dx.get(), dg.get(), db.get(), 1e-5f, dy.get());
    cpu::layernorm_forward<double>(rows, cols, xd.data(), gd.data(), bd.data(), 1e-5, ref.data());
    expect_close(test::download(t, dy, x.size()), ref, eps, 1e-4, "layernorm");

    cuda::gelu_forward(nullptr, t, rows * cols, dx.get(), dy.get());
    cpu::gelu_forward<double>(rows * cols, xd.data(), ref.data());
    expect_close(test::download(t, dy, x.size()), ref, eps, 1e-6, "gelu");

    cuda::residual_add(nullptr, t, rows * cols, dx.get(), dr.get(), dy.get());
    cpu::residual_add<double>(rows * cols, xd.data(), rd.data(), ref.data());
    expect_close(test::download(t, dy, x.size()), ref, eps, 1e-6, "residual");
  }
}

TEST_P(TokenwiseCuda, DropoutMasksMatchCpuBitForBit) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const std::int64_t rows = 33, cols = 515, offset = 1000;
  for (float p : {0.0f, 0.1f, 0.5f}) {
    auto x = test::random_vector<float>(rows * cols, 5);
    DeviceBuffer dx = test::upload(t, x), dy(x.size() * dtype_size(t)), dm(x.size());
    cuda::dropout_forward(nullptr, t, rows, cols, p, 77, offset, dx.get(), dy.get(),
                          dm.as<std::uint8_t>());
    std::vector<float> y(x.size());
    std::vector<std::uint8_t> mask(x.size());
    cpu::dropout_forward<float>(rows, cols, p, 77, offset, x.data(), y.data(), mask.data());
    EXPECT_EQ(test::download_raw<std::uint8_t>(dm, x.size()), mask) << "p=" << p;
    expect_close(test::download(t, dy, x.size()), widen(y), test::storage_eps(t), 1e-6, "dropout");
  }
}

INSTANTIATE_TEST_SUITE_P(Storage, TokenwiseCuda, ::testing::Values(DType::bf16, DType::fp32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(KernelsCudaArgs, Fp64StorageRejected) {
  SUITE_REQUIRE_CUDA_DEVICE();
  EXPECT_THROW(cuda::gelu_forward(nullptr, DType::fp64, 4, nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace suite::kernels

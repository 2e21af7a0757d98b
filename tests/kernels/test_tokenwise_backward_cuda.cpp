// CUDA backward of the token-wise ops against the CPU versions on the same (rounded) inputs.
// Tolerances: the output rounded once to the storage type plus fp32 accumulation over a row
// (LayerNorm, softmax) or over the rows (the LayerNorm weight gradients).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "kernels/tokenwise/tokenwise_cuda.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::DeviceBuffer;

using test::expect_close;
using test::widen;

class TokenwiseBackwardCuda : public ::testing::TestWithParam<DType> {};

TEST_P(TokenwiseBackwardCuda, LayerNorm) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const double eps = test::storage_eps(t);
  for (std::int64_t cols : {64, 1000}) {
    const std::int64_t rows = 129;
    auto x = test::random_vector<float>(rows * cols, cols, -2, 3);
    auto g = test::random_vector<float>(cols, 2, 0.5, 1.5);
    auto dy = test::random_vector<float>(rows * cols, 4);
    DeviceBuffer d_x = test::upload(t, x), d_g = test::upload(t, g), d_dy = test::upload(t, dy),
                 d_dx(x.size() * dtype_size(t)), d_dg(cols * dtype_size(t)),
                 d_db(cols * dtype_size(t)), ws(cuda::layernorm_backward_workspace_bytes(rows));
    cuda::layernorm_backward(nullptr, t, rows, cols, d_x.get(), d_g.get(), d_dy.get(), 1e-5f,
                             d_dx.get(), d_dg.get(), d_db.get(), ws.as<float>());
    std::vector<double> xd = widen(x), gd = widen(g), dyd = widen(dy), dx(x.size()), dg(cols),
                        db(cols);
    cpu::layernorm_backward<double>(rows, cols, xd.data(), gd.data(), dyd.data(), 1e-5, dx.data(),
                                    dg.data(), db.data());
    expect_close(test::download(t, d_dx, x.size()), dx, eps, 1e-3, "dx");
    // A sum over `rows` terms of size ~1: fp32 rounding grows with the row count.
    expect_close(test::download(t, d_dg, cols), dg, eps, 1e-4 * rows, "dgamma");
    expect_close(test::download(t, d_db, cols), db, eps, 1e-4 * rows, "dbeta");
  }
}

TEST_P(TokenwiseBackwardCuda, GeluDropoutSoftmax) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const double eps = test::storage_eps(t);
  const std::int64_t rows = 17, cols = 300, n = rows * cols;
  const float p = 0.2f;
  auto x = test::random_vector<float>(n, 5, -3, 3);
  auto dy = test::random_vector<float>(n, 6);
  std::vector<std::uint8_t> mask(n);
  for (std::int64_t i = 0; i < n; ++i)
    mask[i] = (i * 5 + 1) % 3 != 0;
  DeviceBuffer d_x = test::upload(t, x), d_dy = test::upload(t, dy), d_out(n * dtype_size(t)),
               d_mask = test::upload_raw(mask);
  std::vector<double> xd = widen(x), dyd = widen(dy), ref(n);

  cuda::gelu_backward(nullptr, t, n, d_x.get(), d_dy.get(), d_out.get());
  cpu::gelu_backward<double>(n, xd.data(), dyd.data(), ref.data());
  expect_close(test::download(t, d_out, n), ref, eps, 1e-6, "gelu");

  cuda::dropout_backward(nullptr, t, n, p, d_mask.as<std::uint8_t>(), d_dy.get(), d_out.get());
  cpu::dropout_backward<double>(n, p, mask.data(), dyd.data(), ref.data());
  expect_close(test::download(t, d_out, n), ref, eps, 1e-6, "dropout");

  // Softmax rows as probabilities: positive, summing to 1.
  std::vector<float> probs(n);
  for (std::int64_t r = 0; r < rows; ++r) {
    double l = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      l += std::exp(x[r * cols + c]);
    for (std::int64_t c = 0; c < cols; ++c)
      probs[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c]) / l);
  }
  DeviceBuffer d_p = test::upload(t, probs), d_g = test::upload(t, dy);
  std::vector<double> pd = widen(probs), g = widen(dy);
  cuda::softmax_dropout_backward(nullptr, t, rows, cols, p, d_p.get(), d_mask.as<std::uint8_t>(),
                                 d_g.get());
  cpu::softmax_dropout_backward<double>(rows, cols, p, pd.data(), mask.data(), g.data());
  expect_close(test::download(t, d_g, n), g, eps, 1e-5, "softmax_dropout");
}

INSTANTIATE_TEST_SUITE_P(Storage, TokenwiseBackwardCuda,
                         ::testing::Values(DType::bf16, DType::fp32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace suite::kernels

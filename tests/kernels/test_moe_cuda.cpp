// MoE CUDA kernels against the CPU references on the same (rounded) inputs: the router's
// choice (logits well separated, so rounding cannot reorder them) and gates, the row gather
// (exact), the combine and SwiGLU's silu * mul (one rounding of the output, fp32 arithmetic);
// the backward ops (combine's, router's, SwiGLU's and GeLU's) likewise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/moe/moe_cpu.hpp"
#include "kernels/moe/moe_cuda.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "kernels/tokenwise/tokenwise_cuda.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels::moe {
namespace {

using test::DeviceBuffer;

class MoeCuda : public ::testing::TestWithParam<DType> {};

TEST_P(MoeCuda, RouterMatchesCpu) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const int T = 300, E = 16, k = 4;
  // Logits on a grid of distinct values (a permutation per token): no near-ties.
  std::vector<float> logits(T * E);
  for (int tok = 0; tok < T; ++tok)
    for (int e = 0; e < E; ++e)
      logits[tok * E + e] = 0.25f * static_cast<float>((e * 7 + tok) % E);
  std::vector<float> bias(E, 0.0f), select(E, 0.0f);
  bias[3] = 0.125f;  // half a grid step: still no ties
  select[5] = 1.0f;  // expert 5 always chosen, by a wide margin
  DeviceBuffer dl = test::upload(t, logits), db = test::upload_raw(bias),
               ds = test::upload_raw(select), dc(T * k * 4), dg(T * k * 4),
               dp = test::upload_raw(std::vector<float>(E, 0.0f));
  cuda::router_topk(nullptr, t, T, E, k, dl.get(), db.as<float>(), ds.as<float>(),
                    dc.as<std::int32_t>(), dg.as<float>(), dp.as<float>());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::int32_t> chosen(T * k);
  std::vector<float> gates(T * k);
  std::vector<double> sums(E, 0.0);
  cpu::router_topk<float>(T, E, k, logits.data(), bias.data(), select.data(), chosen.data(),
                          gates.data(), sums.data());
  EXPECT_EQ(test::download_raw<std::int32_t>(dc, T * k), chosen);
  const auto g = test::download_raw<float>(dg, T * k);
  for (int i = 0; i < T * k; ++i)
    ASSERT_NEAR(g[i], gates[i], 1e-5) << i;
  const auto p = test::download_raw<float>(dp, E);
  for (int e = 0; e < E; ++e)
    EXPECT_NEAR(p[e], sums[e], 1e-3 * T);
}

TEST_P(MoeCuda, NodeLimitedRouterMatchesCpu) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const int T = 300, E = 32, k = 8;
  const GroupLimit limit{8, 4, 2};  // 8 nodes of 4 experts, at most 4 per token
  std::vector<float> logits(T * E);
  for (int tok = 0; tok < T; ++tok)
    for (int e = 0; e < E; ++e)
      logits[tok * E + e] = 0.125f * static_cast<float>((e * 13 + tok * 5) % E);
  std::vector<float> bias(E, 0.0f), select(E, 0.0f);
  DeviceBuffer dl = test::upload(t, logits), db = test::upload_raw(bias),
               ds = test::upload_raw(select), dc(T * k * 4), dg(T * k * 4),
               dp = test::upload_raw(std::vector<float>(E, 0.0f));
  cuda::router_topk(nullptr, t, T, E, k, dl.get(), db.as<float>(), ds.as<float>(),
                    dc.as<std::int32_t>(), dg.as<float>(), dp.as<float>(), limit);
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::int32_t> chosen(T * k);
  std::vector<float> gates(T * k);
  std::vector<double> sums(E, 0.0);
  cpu::router_topk<float>(T, E, k, logits.data(), bias.data(), select.data(), chosen.data(),
                          gates.data(), sums.data(), limit);
  EXPECT_EQ(test::download_raw<std::int32_t>(dc, T * k), chosen);
  const auto g = test::download_raw<float>(dg, T * k);
  for (int i = 0; i < T * k; ++i)
    ASSERT_NEAR(g[i], gates[i], 1e-5) << i;
}

TEST_P(MoeCuda, GatherCombineSiluMulMatchCpu) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const std::int64_t rows = 37, cols = 129, tokens = 20;
  const int k = 2;
  auto in = test::random_vector<float>(rows * cols, 3);
  std::vector<std::int64_t> src(rows);
  for (std::int64_t i = 0; i < rows; ++i)
    src[i] = (i * 11) % rows;
  DeviceBuffer din = test::upload(t, in), dsrc = test::upload_raw(src),
               dout(rows * cols * dtype_size(t));
  cuda::gather_rows(nullptr, t, rows, cols, dsrc.as<std::int64_t>(), din.get(), dout.get());
  std::vector<float> ref(rows * cols);
  cpu::gather_rows<float>(rows, cols, src.data(), in.data(), ref.data());
  EXPECT_EQ(test::download(t, dout, ref.size()), ref);

  std::vector<std::int64_t> pos(tokens * k);
  std::vector<float> gates(tokens * k);
  for (std::int64_t i = 0; i < tokens * k; ++i) {
    pos[i] = i % 5 == 3 ? -1 : (i * 3) % rows;  // some dropped copies
    gates[i] = 0.1f + 0.8f * static_cast<float>(i % 7) / 7;
  }
  DeviceBuffer dpos = test::upload_raw(pos), dgate = test::upload_raw(gates),
               dy(tokens * cols * dtype_size(t));
  cuda::combine(nullptr, t, tokens, k, cols, dpos.as<std::int64_t>(), dgate.as<float>(), din.get(),
                dy.get());
  std::vector<float> y(tokens * cols);
  cpu::combine<float>(tokens, k, cols, pos.data(), gates.data(), in.data(), y.data());
  const auto got = test::download(t, dy, y.size());
  for (std::size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(got[i], y[i], test::storage_eps(t) * 2 * std::abs(y[i]) + 1e-6) << i;

  const std::int64_t half = (rows * cols) / 2 / rows;  // silu_mul over [rows, 2 half]
  DeviceBuffer ds(rows * half * dtype_size(t));
  kernels::cuda::silu_mul_forward(nullptr, t, rows, half, din.get(), ds.get());
  std::vector<float> s(rows * half);
  kernels::cpu::silu_mul_forward<float>(rows, half, in.data(), s.data());
  const auto sg = test::download(t, ds, s.size());
  for (std::size_t i = 0; i < s.size(); ++i)
    ASSERT_NEAR(sg[i], s[i], test::storage_eps(t) * 2 * std::abs(s[i]) + 1e-6) << i;
}

// |got - want| within `roundings` roundings of the storage type, relative to the larger of 1
// and the largest |want| (fp32 arithmetic on the device, double on the CPU).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, DType t,
                  double roundings = 4) {
  float scale = 1;
  for (float w : want)
    scale = std::max(scale, std::abs(w));
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], roundings * test::storage_eps(t) * scale) << i;
}

TEST_P(MoeCuda, BackwardOpsMatchCpu) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const std::int64_t tokens = 20, cols = 129;
  const int k = 2, E = 8;
  // Kept copies fill rows 0, 1, ... in copy order; every fifth copy is dropped.
  std::vector<std::int64_t> pos(tokens * k);
  std::int64_t rows = 0;
  for (std::int64_t i = 0; i < tokens * k; ++i)
    pos[i] = i % 5 == 3 ? -1 : rows++;
  auto gates = test::random_vector<float>(tokens * k, 51, 0.1, 0.9);
  auto dy = test::random_vector<float>(tokens * cols, 52);
  auto back = test::random_vector<float>(rows * cols, 53);
  DeviceBuffer ddy = test::upload(t, dy), dback = test::upload(t, back),
               dpos = test::upload_raw(pos), dgates = test::upload_raw(gates),
               dgrad(rows * cols * dtype_size(t)), dgg(tokens * k * 4);
  cuda::combine_backward(nullptr, t, tokens, k, cols, dpos.as<std::int64_t>(), dgates.as<float>(),
                         ddy.get(), dback.get(), dgrad.get(), dgg.as<float>());
  std::vector<float> grad(rows * cols), gg(tokens * k);
  cpu::combine_backward<float>(tokens, k, cols, pos.data(), gates.data(), dy.data(), back.data(),
                               grad.data(), gg.data());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(test::download(t, dgrad, grad.size()), grad, t);
  // Gate gradients: fp32 dot products of `cols` terms on the device.
  expect_close(test::download_raw<float>(dgg, gg.size()), gg, DType::fp32, 4.0 * cols);

  // Router: distinct logits (no ties), a choice, gate and probability gradients.
  std::vector<float> logits(tokens * E);
  for (std::int64_t tok = 0; tok < tokens; ++tok)
    for (int e = 0; e < E; ++e)
      logits[tok * E + e] = 0.25f * static_cast<float>((e * 5 + tok) % E);
  std::vector<float> bias(E, 0.0f), prob_grad = test::random_vector<float>(E, 54, 0, 0.1);
  bias[2] = 0.125f;
  std::vector<std::int32_t> chosen(tokens * k);
  std::vector<float> g(tokens * k), dz(tokens * E);
  std::vector<double> sums(E, 0.0);
  DeviceBuffer dl = test::upload(t, logits);  // rounds logits to what the device holds
  cpu::router_topk<float>(tokens, E, k, logits.data(), bias.data(), nullptr, chosen.data(),
                          g.data(), sums.data());
  cpu::router_backward<float>(tokens, E, k, logits.data(), bias.data(), chosen.data(), gg.data(),
                              prob_grad.data(), dz.data());
  DeviceBuffer db = test::upload_raw(bias), dc = test::upload_raw(chosen),
               dgg2 = test::upload_raw(gg), dpg = test::upload_raw(prob_grad),
               ddz(tokens * E * dtype_size(t));
  cuda::router_backward(nullptr, t, tokens, E, k, dl.get(), db.as<float>(), dc.as<std::int32_t>(),
                        dgg2.as<float>(), dpg.as<float>(), ddz.get());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(test::download(t, ddz, dz.size()), dz, t);

  // Activations: x [rows, 2 cols] for SwiGLU.
  auto x = test::random_vector<float>(rows * 2 * cols, 55, -4, 4);
  auto da = test::random_vector<float>(rows * 2 * cols, 56);
  DeviceBuffer dx = test::upload(t, x), dda = test::upload(t, da),
               dout(rows * 2 * cols * dtype_size(t));
  std::vector<float> out(rows * 2 * cols);
  cuda::swiglu_backward(nullptr, t, rows, cols, dx.get(), dda.get(), dout.get());
  cpu::swiglu_backward<float>(rows, cols, x.data(), da.data(), out.data());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(test::download(t, dout, out.size()), out, t);
}

INSTANTIATE_TEST_SUITE_P(Storage, MoeCuda, ::testing::Values(DType::bf16, DType::fp32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace suite::kernels::moe

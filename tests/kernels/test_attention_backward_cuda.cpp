// CUDA attention backward against the double-precision reference gradients: the suite's kernel
// (cuda::attention_backward with the reference's final statistics) and both engines (suite,
// cuDNN) end to end (forward, delta, backward) on every mask kind a ring or Ulysses step hands
// them, GQA, d = 64 and 128, odd sizes, strided rows, bf16 and fp32; key blocks adding up to
// the full gradient with the final lse (the ring's use); delta and accumulate. cuDNN cases skip
// when the build has no cuDNN; every case skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_cuda.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "tests/kernels/attention_blocks.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::DeviceBuffer;
using test::Kind;

// Tolerance on tol * (|ref| + max |ref|) (attention_blocks.hpp's expect_grad_near). fp32: fp32
// arithmetic. bf16: the stored o (hence delta) is rounded to bf16; cuDNN also rounds P and dS
// to bf16 for its tensor-core matmuls and its block gradients to bf16 before the fp32 sum. A
// numpy model of those roundings on these inputs' distributions gives errors up to about
// 5e-3 on this scale; the emulated suite kernel (test_attention_backward_emulated.cpp) 3e-3.
double grad_tol(DType t) {
  return t == DType::bf16 ? 4 * test::storage_eps(t) : 5e-4;
}

// Zeroed fp32 accumulators of n elements.
DeviceBuffer zeros(std::size_t n) {
  DeviceBuffer b(n * sizeof(float));
  SUITE_CUDA_CHECK(cudaMemset(b.get(), 0, b.bytes()));
  return b;
}

struct Grads {
  std::vector<float> dq, dk, dv;
};

Grads download_grads(const DeviceBuffer& dq, const DeviceBuffer& dk, const DeviceBuffer& dv,
                     const AttentionParams& p) {
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  return {test::download_raw<float>(dq, static_cast<std::size_t>(p.cq * p.ld_q)),
          test::download_raw<float>(dk, static_cast<std::size_t>(p.ck * p.ld_k)),
          test::download_raw<float>(dv, static_cast<std::size_t>(p.ck * p.ld_v))};
}

// An engine's forward over the whole problem and its delta in storage type t, with zeroed fp32
// gradient accumulators: where every engine backward below starts. Uploading rounds x's inputs
// to t first, so the reference sees what the device holds.
struct EngineForward {
  test::BackwardProblem ref;
  DeviceBuffer q, k, v, d_o, o, lse, delta, qp, kp, dq, dk, dv;
};

EngineForward engine_forward(AttentionEngine& engine, DType t, test::AttentionProblem& x) {
  const AttentionParams& p = x.p;
  DeviceBuffer q = test::upload(t, x.q), k = test::upload(t, x.k), v = test::upload(t, x.v);
  test::BackwardProblem ref = test::make_backward(x, t == DType::bf16);
  std::vector<float> d_o = ref.d_o, o0(d_o.size(), 0.0f);
  EngineForward f{std::move(ref),
                  std::move(q),
                  std::move(k),
                  std::move(v),
                  test::upload(t, d_o),
                  test::upload(t, o0),
                  DeviceBuffer(sizeof(float) * p.heads * p.cq),
                  DeviceBuffer(sizeof(float) * p.heads * p.cq),
                  test::upload_raw(x.blk.qp),
                  test::upload_raw(x.blk.kp),
                  zeros(x.q.size()),
                  zeros(x.k.size()),
                  zeros(x.v.size())};
  engine.forward(p, x.blk.hint, f.q.get(), f.k.get(), f.v.get(), f.qp.as<std::int64_t>(),
                 f.kp.as<std::int64_t>(), f.o.get(), f.lse.get());
  engine.backward_delta(p.cq, p.heads, p.head_dim, f.o.get(), f.d_o.get(), p.ld_o, f.delta.get());
  return f;
}

using test::BlockCase;
using test::EngineCase;

std::string block_case_name(const ::testing::TestParamInfo<BlockCase>& info) {
  return test::block_case_name(info.param);
}

class BackwardKernelCuda : public ::testing::TestWithParam<BlockCase> {};

// The kernel from the reference's lse and o (stored in the storage type, as a forward leaves
// it), delta from cuda::attention_backward_delta (checked against the host's sum first).
TEST_P(BackwardKernelCuda, MatchesReference) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const BlockCase c = GetParam();
  test::AttentionProblem x = test::make_problem(c);
  const AttentionParams& p = x.p;
  DeviceBuffer q = test::upload(c.t, x.q), k = test::upload(c.t, x.k), v = test::upload(c.t, x.v);
  const test::BackwardProblem ref = test::make_backward(x, c.t == DType::bf16);
  std::vector<float> d_o = ref.d_o, o(ref.o.begin(), ref.o.end()),
                     lse(ref.lse.begin(), ref.lse.end());
  DeviceBuffer dd_o = test::upload(c.t, d_o), d_out = test::upload(c.t, o),
               d_lse = test::upload(DType::fp32, lse), d_delta(sizeof(float) * lse.size()),
               qp = test::upload_raw(x.blk.qp), kp = test::upload_raw(x.blk.kp);
  cuda::attention_backward_delta(nullptr, c.t, p.cq, p.heads, p.head_dim, d_out.get(), dd_o.get(),
                                 p.ld_o, d_delta.as<float>());
  const std::vector<float> delta = test::download_raw<float>(d_delta, lse.size());
  for (int h = 0; h < p.heads; ++h)
    for (std::int64_t i = 0; i < p.cq; ++i) {
      double want = 0, mag = 0;
      for (int e = 0; e < p.head_dim; ++e) {
        const std::size_t idx = static_cast<std::size_t>(i * p.ld_o + h * p.head_dim + e);
        want += static_cast<double>(o[idx]) * d_o[idx];
        mag += std::abs(static_cast<double>(o[idx]) * d_o[idx]);
      }
      ASSERT_NEAR(delta[h * p.cq + i], want, 4e-6 * mag + 1e-30) << "delta " << h << "," << i;
    }
  DeviceBuffer dq = zeros(x.q.size()), dk = zeros(x.k.size()), dv = zeros(x.v.size());
  cuda::attention_backward(nullptr, c.t, p, q.get(), k.get(), v.get(), dd_o.get(),
                           d_lse.as<float>(), d_delta.as<float>(), qp.as<std::int64_t>(),
                           kp.as<std::int64_t>(), dq.as<float>(), dk.as<float>(), dv.as<float>());
  const Grads g = download_grads(dq, dk, dv, p);
  test::expect_grads_match(p, ref, g.dq, g.dk, g.dv, grad_tol(c.t), "suite kernel");
}

std::vector<BlockCase> kernel_cases() {
  std::vector<BlockCase> cases;
  for (DType t : {DType::bf16, DType::fp32}) {
    for (int d : {64, 128}) {
      for (Kind kind : test::kAllKinds)
        cases.push_back({t, kind, 128, 96, 4, 2, d});
      cases.push_back({t, Kind::full, 77, 133, 6, 2, d});
      cases.push_back({t, Kind::top_left, 200, 72, 4, 1, d});
      cases.push_back({t, Kind::bottom_right, 65, 191, 8, 1, d});
      cases.push_back({t, Kind::full, 1, 1, 1, 1, d});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Blocks, BackwardKernelCuda, ::testing::ValuesIn(kernel_cases()),
                         block_case_name);

// ---- The engines, end to end ------------------------------------------------------------

std::string engine_case_name(const ::testing::TestParamInfo<EngineCase>& info) {
  return test::engine_case_name(info.param);
}

class BackwardEngineCuda : public ::testing::TestWithParam<EngineCase> {};

TEST_P(BackwardEngineCuda, MatchesReference) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const EngineCase c = GetParam();
  if (test::cudnn_not_built(c.choice)) GTEST_SKIP() << "this build has no cuDNN";
  const BlockCase& b = c.block;
  auto engine = make_cuda_attention_engine(nullptr, b.t, c.choice);
  ASSERT_EQ(engine->grad_type(), DType::fp32);
  test::AttentionProblem x = test::make_problem(b);
  const AttentionParams& p = x.p;
  const EngineForward f = engine_forward(*engine, b.t, x);
  const std::int64_t fallbacks_before = engine->fallbacks();
  engine->backward(p, x.blk.hint, f.q.get(), f.k.get(), f.v.get(), f.o.get(), f.d_o.get(),
                   f.lse.get(), f.delta.get(), f.qp.as<std::int64_t>(), f.kp.as<std::int64_t>(),
                   f.dq.get(), f.dk.get(), f.dv.get());
  const Grads g = download_grads(f.dq, f.dk, f.dv, p);
  test::expect_grads_match(p, f.ref, g.dq, g.dk, g.dv, grad_tol(b.t), engine->name());
  if (HasFatalFailure()) return;
  const std::int64_t fell_back = engine->fallbacks() - fallbacks_before;
  if (engine->name() != "cudnn") {
    EXPECT_EQ(fell_back, 0);
  } else if (x.blk.hint == BlockMask::positions) {
    EXPECT_EQ(fell_back, 1);  // positions-only masks always go to the suite's kernel
  } else if (b.cq % 64 == 0 && b.ck % 64 == 0) {
    // The shapes the benchmarks use: cuDNN must run them itself.
    EXPECT_EQ(fell_back, 0) << engine->fallback_reason();
  } else if (fell_back > 0) {
    std::printf("note: cuDNN backward fell back on %s: %s\n", test::engine_case_name(c).c_str(),
                engine->fallback_reason().c_str());
  }
}

std::vector<EngineCase> engine_cases() {
  std::vector<EngineCase> cases;
  for (AttnKernelChoice ch : {AttnKernelChoice::suite, AttnKernelChoice::cudnn}) {
    for (int d : {64, 128}) {
      for (Kind kind : test::kAllKinds)
        cases.push_back({ch, DType::bf16, kind, 128, 128, 4, 4, d});
      cases.push_back({ch, DType::bf16, Kind::full, 77, 133, 6, 2, d});
      cases.push_back({ch, DType::bf16, Kind::top_left, 128, 128, 8, 2, d});
      cases.push_back({ch, DType::bf16, Kind::top_left, 200, 72, 4, 1, d});
      cases.push_back({ch, DType::bf16, Kind::bottom_right, 64, 192, 8, 1, d});
      cases.push_back({ch, DType::bf16, Kind::bottom_right, 65, 191, 8, 1, d});
      cases.push_back({ch, DType::bf16, Kind::full, 1, 1, 1, 1, d});
    }
  }
  // fp32 storage: the suite's kernel whatever the choice says (auto).
  for (int d : {64, 128})
    cases.push_back({AttnKernelChoice::automatic, DType::fp32, Kind::zigzag, 96, 96, 4, 2, d});
  cases.push_back({AttnKernelChoice::automatic, DType::bf16, Kind::top_left, 256, 256, 4, 2, 128});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Blocks, BackwardEngineCuda, ::testing::ValuesIn(engine_cases()),
                         engine_case_name);

// The ring's use with blocks cuDNN expresses: queries at positions [c, 2c) against keys
// [0, 2c) (causal bottom-right). Forward over all keys gives the final o and lse; the backward
// over key block [0, c) (fully visible: mask full) and block [c, 2c) (the diagonal: causal
// top-left), adding into the same accumulators, gives the full gradient.
TEST(BackwardEngineCudaKeyBlocks, ContributionsAddUpToTheFullGradient) {
  SUITE_REQUIRE_CUDA_DEVICE();
  for (AttnKernelChoice ch : {AttnKernelChoice::suite, AttnKernelChoice::cudnn}) {
    if (test::cudnn_not_built(ch)) continue;
    const std::int64_t c = 128;
    test::AttentionProblem x = test::make_problem(Kind::bottom_right, c, 2 * c, 4, 2, 128);
    const AttentionParams& p = x.p;
    auto engine = make_cuda_attention_engine(nullptr, DType::bf16, ch);
    const DType t = DType::bf16;
    const EngineForward f = engine_forward(*engine, t, x);
    const std::int64_t fallbacks_before = engine->fallbacks();
    for (int b = 0; b < 2; ++b) {
      AttentionParams pb = p;
      pb.ck = c;
      const std::int64_t off = b * c * p.ld_k;  // ld_k == ld_v here
      engine->backward(pb, b == 0 ? BlockMask::full : BlockMask::causal_top_left, f.q.get(),
                       f.k.as<bf16>() + off, f.v.as<bf16>() + off, f.o.get(), f.d_o.get(),
                       f.lse.get(), f.delta.get(), f.qp.as<std::int64_t>(),
                       f.kp.as<std::int64_t>() + b * c, f.dq.get(), f.dk.as<float>() + off,
                       f.dv.as<float>() + off);
    }
    EXPECT_EQ(engine->fallbacks(), fallbacks_before) << engine->fallback_reason();
    const Grads g = download_grads(f.dq, f.dk, f.dv, p);
    test::expect_grads_match(p, f.ref, g.dq, g.dk, g.dv, grad_tol(t), engine->name());
  }
}

// ---- Accumulation ------------------------------------------------------------------------

TEST(AccumulateCuda, IntoFp32AndBf16LikeTheCpuEngine) {
  SUITE_REQUIRE_CUDA_DEVICE();
  auto engine = make_cuda_attention_engine(nullptr, DType::bf16, AttnKernelChoice::automatic);
  std::vector<float> src = {1.5f, -2.25f, 3.0f}, f32 = {1.f, 1.f, 1.f};
  std::vector<bf16> b16 = {to_bf16(1.f), to_bf16(256.f), to_bf16(1.f)};
  DeviceBuffer d_src = test::upload(DType::fp32, src), d_f32 = test::upload(DType::fp32, f32),
               d_b16 = test::upload_raw(b16);
  engine->accumulate(d_f32.get(), DType::fp32, d_src.get(), 3);
  engine->accumulate(d_b16.get(), DType::bf16, d_src.get(), 3);
  EXPECT_THROW(engine->accumulate(d_f32.get(), DType::fp64, d_src.get(), 3), std::invalid_argument);
  EXPECT_EQ(test::download_raw<float>(d_f32, 3), (std::vector<float>{2.5f, -1.25f, 4.f}));
  const std::vector<bf16> got = test::download_raw<bf16>(d_b16, 3);
  EXPECT_EQ(to_float(got[0]), 2.5f);
  EXPECT_EQ(to_float(got[1]), 254.f);  // 253.75 rounds to bf16's nearest
  EXPECT_EQ(to_float(got[2]), 4.f);

  // A large n (grid-stride loop) and the strided-rows form, which leaves the padding alone.
  const std::size_t n = 3'000'000;
  std::vector<float> big(n, 0.5f), acc(n, 1.0f);
  DeviceBuffer d_big = test::upload(DType::fp32, big), d_acc = test::upload(DType::fp32, acc);
  cuda::accumulate(nullptr, d_acc.get(), DType::fp32, d_big.as<float>(), n);
  const std::vector<float> sum = test::download_raw<float>(d_acc, n);
  EXPECT_EQ(sum.front(), 1.5f);
  EXPECT_EQ(sum.back(), 1.5f);
  const std::int64_t rows = 5, cols = 6, ld_dst = 9, ld_src = 7;
  std::vector<float> dst(rows * ld_dst, -1.0f), rsrc(rows * ld_src);
  for (std::size_t i = 0; i < rsrc.size(); ++i)
    rsrc[i] = static_cast<float>(i);
  DeviceBuffer d_dst = test::upload(DType::fp32, dst), d_rsrc = test::upload(DType::bf16, rsrc);
  cuda::accumulate_rows(nullptr, d_dst.as<float>(), ld_dst, DType::bf16, d_rsrc.get(), ld_src, rows,
                        cols);
  const std::vector<float> out = test::download_raw<float>(d_dst, dst.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t e = 0; e < ld_dst; ++e)
      ASSERT_EQ(out[r * ld_dst + e], e < cols ? rsrc[r * ld_src + e] - 1.0f : -1.0f)
          << r << "," << e;
}

}  // namespace
}  // namespace suite::kernels

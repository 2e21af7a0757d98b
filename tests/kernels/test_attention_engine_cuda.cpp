// CUDA attention engines (the suite's kernel and cuDNN's SDPA) against the CPU reference for
// every mask kind a ring or Ulysses step hands them: full, causal top-left / bottom-right,
// zig-zag and striped position sets, fully masked; GQA; d = 64 and 128; odd sizes; lse.
// cuDNN cases skip when the build has no cuDNN; every case skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "tests/kernels/attention_blocks.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::Block;
using test::block_for;
using test::DeviceBuffer;
using test::Kind;

using test::EngineCase;

std::string engine_case_name(const ::testing::TestParamInfo<EngineCase>& info) {
  return test::engine_case_name(info.param);
}

class EngineCuda : public ::testing::TestWithParam<EngineCase> {};

TEST_P(EngineCuda, MatchesCpuReference) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const EngineCase c = GetParam();
  if (test::cudnn_not_built(c.choice)) GTEST_SKIP() << "this build has no cuDNN";
  const test::BlockCase& b = c.block;
  std::unique_ptr<AttentionEngine> engine = make_cuda_attention_engine(nullptr, b.t, c.choice);
  test::AttentionProblem x = test::make_problem(b);
  const AttentionParams& p = x.p;
  const Block& blk = x.blk;
  std::vector<float>&q = x.q, &k = x.k, &v = x.v;
  std::vector<float> o0(p.cq * p.ld_o, 0.0f);
  DeviceBuffer dq = test::upload(b.t, q), dk = test::upload(b.t, k), dv = test::upload(b.t, v),
               dqp = test::upload_raw(blk.qp), dkp = test::upload_raw(blk.kp),
               d_o = test::upload(b.t, o0), d_lse(sizeof(float) * b.a * b.cq);
  engine->forward(p, blk.hint, dq.get(), dk.get(), dv.get(), dqp.as<std::int64_t>(),
                  dkp.as<std::int64_t>(), d_o.get(), d_lse.get());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());

  const std::vector<float> got = test::download(b.t, d_o, o0.size());
  const std::vector<float> got_lse =
      test::download_raw<float>(d_lse, static_cast<std::size_t>(b.a) * b.cq);
  test::expect_matches_reference(p, blk, q, k, v, got, got_lse, test::storage_eps(b.t),
                                 engine->name());
  if (HasFatalFailure()) return;
  // cuDNN runs every block it can express (certainly the 64-multiple shapes the benchmarks
  // use; odd sizes may find no engine and fall back, which the output check above covers);
  // positions-only masks always go to the suite's kernel.
  if (engine->name() == "cudnn") {
    const bool expressible = blk.hint != BlockMask::positions;
    if (!expressible) {
      EXPECT_EQ(engine->fallbacks(), 1);
    } else if (b.cq % 64 == 0 && b.ck % 64 == 0) {
      EXPECT_EQ(engine->fallbacks(), 0) << engine->fallback_reason();
    } else if (engine->fallbacks() > 0) {
      std::printf("note: cuDNN fell back on %s: %s\n", test::engine_case_name(c).c_str(),
                  engine->fallback_reason().c_str());
    }
  } else {
    EXPECT_EQ(engine->fallbacks(), 0);
  }
}

std::vector<EngineCase> engine_cases() {
  std::vector<EngineCase> cases;
  for (AttnKernelChoice ch : {AttnKernelChoice::suite, AttnKernelChoice::cudnn}) {
    for (int d : {64, 128}) {
      for (Kind kind : test::kAllKinds) {
        cases.push_back({ch, DType::bf16, kind, 128, 128, 4, 4, d});
      }
      // Odd sizes and GQA.
      cases.push_back({ch, DType::bf16, Kind::full, 77, 133, 6, 2, d});
      cases.push_back({ch, DType::bf16, Kind::top_left, 130, 130, 8, 2, d});
      cases.push_back({ch, DType::bf16, Kind::top_left, 200, 72, 4, 1, d});
      cases.push_back({ch, DType::bf16, Kind::bottom_right, 65, 191, 8, 1, d});
      cases.push_back({ch, DType::bf16, Kind::zigzag, 96, 96, 4, 2, d});
      cases.push_back({ch, DType::bf16, Kind::masked, 33, 17, 2, 1, d});
      cases.push_back({ch, DType::bf16, Kind::full, 1, 1, 1, 1, d});
    }
  }
  // fp32 storage: the suite's kernel whatever the choice says (auto).
  cases.push_back({AttnKernelChoice::automatic, DType::fp32, Kind::top_left, 100, 100, 4, 2, 64});
  cases.push_back({AttnKernelChoice::automatic, DType::bf16, Kind::top_left, 256, 256, 4, 2, 128});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Blocks, EngineCuda, ::testing::ValuesIn(engine_cases()), engine_case_name);

TEST(EngineCudaChoice, NamesAndRefusals) {
  SUITE_REQUIRE_CUDA_DEVICE();
  EXPECT_EQ(make_cuda_attention_engine(nullptr, DType::fp32, AttnKernelChoice::automatic)->name(),
            "suite-flash");
  EXPECT_EQ(make_cuda_attention_engine(nullptr, DType::bf16, AttnKernelChoice::suite)->name(),
            "suite-flash");
  EXPECT_THROW(make_cuda_attention_engine(nullptr, DType::fp32, AttnKernelChoice::cudnn),
               std::invalid_argument);
  EXPECT_THROW(make_cuda_attention_engine(nullptr, DType::fp64, AttnKernelChoice::suite),
               std::invalid_argument);
#if defined(SUITE_HAVE_CUDNN)
  auto e = make_cuda_attention_engine(nullptr, DType::bf16, AttnKernelChoice::automatic);
  EXPECT_EQ(e->name(), "cudnn");
  EXPECT_EQ(e->library_version().rfind("cudnn 9.", 0), 0u) << e->library_version();
  std::printf("cuDNN engine: %s\n", e->library_version().c_str());
#else
  EXPECT_THROW(make_cuda_attention_engine(nullptr, DType::bf16, AttnKernelChoice::cudnn),
               std::invalid_argument);
#endif
}

}  // namespace
}  // namespace suite::kernels

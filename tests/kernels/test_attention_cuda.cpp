// CUDA attention (flash, unfused) and LSE merge against the CPU references on the same
// rounded inputs. Tolerance: one rounding of o to the storage type, plus fp32 arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/attention_cuda.hpp"
#include "tests/kernels/cuda_test_util.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::DeviceBuffer;

struct Case {
  DType t;
  std::int64_t cq, ck;
  int a, nkv, d;
  bool causal;
  test::Layout layout;
};

struct HostInputs {
  std::vector<float> q, k, v;
  std::vector<std::int64_t> qp, kp;
};

HostInputs make_inputs(const AttentionParams& p, const Case& c, std::uint64_t seed) {
  HostInputs in{test::random_vector<float>(p.cq * p.ld_q, seed),
                test::random_vector<float>(p.ck * p.ld_k, seed + 1, -2, 2),
                test::random_vector<float>(p.ck * p.ld_v, seed + 2),
                {},
                {}};
  // Query block of rank 2, key block of rank 1 of a 4-rank ring: partly visible when causal.
  in.qp = test::block_positions(c.layout, 2, 4, c.cq);
  in.kp = test::block_positions(c.layout, 1, 4, c.ck);
  return in;
}

// abs_tol: extra absolute error allowed on top of fp32 rounding (bf16-rounded scores).
void expect_lse_close(const std::vector<float>& got, const std::vector<double>& ref,
                      double abs_tol = 0.0) {
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      ASSERT_EQ(got[i], -INFINITY) << "lse " << i;
    } else {
      ASSERT_NEAR(got[i], ref[i], abs_tol + 1e-4 * std::max(1.0, std::abs(ref[i]))) << "lse " << i;
    }
  }
}

class FlashCuda : public ::testing::TestWithParam<Case> {};

TEST_P(FlashCuda, MatchesCpuReference) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const Case c = GetParam();
  auto p = make_attention_params(c.cq, c.ck, c.a, c.nkv, c.d, c.causal);
  p.ld_q += 8;  // strided rows, as inside an [s, b, h] tensor
  p.ld_o += 16;
  HostInputs in = make_inputs(p, c, 31);
  DeviceBuffer dq = test::upload(c.t, in.q), dk = test::upload(c.t, in.k),
               dv = test::upload(c.t, in.v), dqp = test::upload_raw(in.qp),
               dkp = test::upload_raw(in.kp);
  std::vector<float> o0(p.cq * p.ld_o, 0.0f);
  DeviceBuffer d_o = test::upload(c.t, o0), d_lse(sizeof(float) * c.a * c.cq);
  cuda::attention_forward(nullptr, c.t, p, dq.get(), dk.get(), dv.get(), dqp.as<std::int64_t>(),
                          dkp.as<std::int64_t>(), d_o.get(), d_lse.as<float>());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<double> q(in.q.begin(), in.q.end()), k(in.k.begin(), in.k.end()),
      v(in.v.begin(), in.v.end()), o(o0.size(), 0.0), lse(c.a * c.cq);
  cpu::attention_reference<double>(p, q.data(), k.data(), v.data(), in.qp.data(), in.kp.data(),
                                   o.data(), lse.data());
  const std::vector<float> got = test::download(c.t, d_o, o.size());
  const double eps = test::storage_eps(c.t);
  // bf16 runs on tensor cores (sm_80+), which round P to bf16 before P V: up to eps * max|v|.
  const double p_round = c.t == DType::bf16 ? 2 * eps * test::max_abs(v) : 0.0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i]));
    ASSERT_NEAR(got[i], o[i], eps * std::abs(o[i]) + p_round + 3e-5) << "o " << i;
  }
  expect_lse_close(test::download_raw<float>(d_lse, lse.size()), lse);
}

std::vector<Case> flash_cases() {
  std::vector<Case> cases;
  for (DType t : {DType::bf16, DType::fp32}) {
    for (int d : {64, 128}) {
      cases.push_back({t, 1, 1, 1, 1, d, false, test::Layout::contiguous});
      cases.push_back({t, 100, 70, 4, 4, d, false, test::Layout::contiguous});
      cases.push_back({t, 130, 130, 8, 2, d, true, test::Layout::contiguous});
      cases.push_back({t, 96, 96, 4, 1, d, true, test::Layout::zigzag});
      cases.push_back({t, 64, 96, 6, 3, d, true, test::Layout::striped});
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.t)) + "_q" + std::to_string(c.cq) + "_k" + std::to_string(c.ck) +
         "_a" + std::to_string(c.a) + "_kv" + std::to_string(c.nkv) + "_d" + std::to_string(c.d) +
         (c.causal ? "_causal_" + std::string(test::layout_name(c.layout)) : std::string("_full"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashCuda, ::testing::ValuesIn(flash_cases()), case_name);

TEST(FlashCudaMasking, FullyMaskedRowsAndHeadDimCheck) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const auto p = make_attention_params(70, 40, 2, 1, 64, true);
  std::vector<float> q = test::random_vector<float>(p.cq * p.ld_q, 1);
  std::vector<float> k = test::random_vector<float>(p.ck * p.ld_k, 2);
  std::vector<float> v = test::random_vector<float>(p.ck * p.ld_v, 3);
  const auto qp = test::iota_positions(70),
             kp = test::iota_positions(40, 50);  // q < 50 see nothing
  DeviceBuffer dq = test::upload(DType::fp32, q), dk = test::upload(DType::fp32, k),
               dv = test::upload(DType::fp32, v), dqp = test::upload_raw(qp),
               dkp = test::upload_raw(kp), d_o(4 * q.size()), d_lse(4 * 2 * 70);
  cuda::attention_forward(nullptr, DType::fp32, p, dq.get(), dk.get(), dv.get(),
                          dqp.as<std::int64_t>(), dkp.as<std::int64_t>(), d_o.get(),
                          d_lse.as<float>());
  const auto o = test::download(DType::fp32, d_o, q.size());
  const auto lse = test::download_raw<float>(d_lse, 2 * 70);
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 70; ++i) {
      EXPECT_EQ(std::isinf(lse[h * 70 + i]), i < 50) << h << "," << i;
      for (int c = 0; c < 64; ++c) {
        const float x = o[i * p.ld_o + h * 64 + c];
        ASSERT_FALSE(std::isnan(x));
        if (i < 50) {
          ASSERT_EQ(x, 0.0f);
        }
      }
    }
  }
  auto bad = p;
  bad.head_dim = 80;
  EXPECT_THROW(cuda::attention_forward(nullptr, DType::fp32, bad, dq.get(), dk.get(), dv.get(),
                                       dqp.as<std::int64_t>(), dkp.as<std::int64_t>(), d_o.get(),
                                       d_lse.as<float>()),
               std::invalid_argument);
}

class UnfusedCuda : public ::testing::TestWithParam<DType> {};

TEST_P(UnfusedCuda, MatchesCpuUnfused) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const DType t = GetParam();
  const Case c{t, 80, 112, 8, 2, 64, true, test::Layout::zigzag};
  const auto p = make_attention_params(c.cq, c.ck, c.a, c.nkv, c.d, c.causal);
  HostInputs in = make_inputs(p, c, 51);
  const float drop = 0.2f;
  const int head_offset = 8;  // as TP rank 1 of 2 with 16 heads in total
  const std::size_t planes = static_cast<std::size_t>(c.a) * c.cq * c.ck;
  DeviceBuffer dq = test::upload(t, in.q), dk = test::upload(t, in.k), dv = test::upload(t, in.v),
               dqp = test::upload_raw(in.qp), dkp = test::upload_raw(in.kp),
               dprobs(planes * dtype_size(t)), dmask(planes), ddrop(planes * dtype_size(t)),
               d_o(p.cq * p.ld_o * dtype_size(t)), d_lse(sizeof(float) * c.a * c.cq);
  cuda::CublasHandle handle;
  cuda::attention_unfused(handle, nullptr, t, p, drop, 99, head_offset, dq.get(), dk.get(),
                          dv.get(), dqp.as<std::int64_t>(), dkp.as<std::int64_t>(), dprobs.get(),
                          dmask.as<std::uint8_t>(), ddrop.get(), d_o.get(), d_lse.as<float>());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<double> q(in.q.begin(), in.q.end()), k(in.k.begin(), in.k.end()),
      v(in.v.begin(), in.v.end()), probs(planes), dropped(planes), o(p.cq * p.ld_o),
      lse(c.a * c.cq);
  std::vector<std::uint8_t> mask(planes);
  cpu::attention_unfused<double>(p, drop, 99, head_offset, q.data(), k.data(), v.data(),
                                 in.qp.data(), in.kp.data(), probs.data(), mask.data(),
                                 dropped.data(), o.data(), lse.data());
  EXPECT_EQ(test::download_raw<std::uint8_t>(dmask, planes), mask);
  // bf16 rounds the scores before the softmax: relative error about eps * (1 + |score|).
  const double eps = test::storage_eps(t);
  // Scores s are stored once in the storage type, so each moves by up to eps/2 * |s|: p
  // changes by a factor within exp(+-eps * smax), lse by eps/2 * smax.
  double smax = 0;
  for (int h = 0; h < c.a; ++h) {
    const int kh = kv_head_for(h, c.a, c.nkv);
    for (std::int64_t i = 0; i < p.cq; ++i) {
      for (std::int64_t j = 0; j < p.ck; ++j) {
        double dot = 0;
        for (int e = 0; e < c.d; ++e)
          dot += q[i * p.ld_q + h * c.d + e] * k[j * p.ld_k + kh * c.d + e];
        smax = std::max(smax, std::abs(dot) * p.softmax_scale);
      }
    }
  }
  const double tol_p = eps * (2.0 + 2.0 * smax);
  const auto got_p = test::download(t, dprobs, planes);
  const auto got_d = test::download(t, ddrop, planes);
  for (std::size_t e = 0; e < planes; ++e) {
    ASSERT_NEAR(got_p[e], probs[e], tol_p * probs[e] + 1e-6) << "probs " << e;
    ASSERT_NEAR(got_d[e], dropped[e], tol_p * dropped[e] + 1e-6) << "dropped " << e;
  }
  const auto got_o = test::download(t, d_o, o.size());
  for (std::size_t e = 0; e < o.size(); ++e) {
    ASSERT_NEAR(got_o[e], o[e], 2 * tol_p * test::max_abs(v) + 1e-5) << "o " << e;
  }
  expect_lse_close(test::download_raw<float>(d_lse, lse.size()), lse, eps * smax);
}

INSTANTIATE_TEST_SUITE_P(Storage, UnfusedCuda, ::testing::Values(DType::bf16, DType::fp32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(LseMergeCuda, MatchesCpuMergeInPlace) {
  SUITE_REQUIRE_CUDA_DEVICE();
  for (DType t : {DType::bf16, DType::fp32}) {
    const std::int64_t cq = 37;
    const int a = 5, d = 128;
    auto oa = test::random_vector<float>(cq * a * d, 1),
         ob = test::random_vector<float>(cq * a * d, 2);
    auto la = test::random_vector<float>(a * cq, 3, -5, 5),
         lb = test::random_vector<float>(a * cq, 4, -5, 5);
    la[0] = -INFINITY;
    lb[1] = -INFINITY;
    la[2] = lb[2] = -INFINITY;
    DeviceBuffer d_oa = test::upload(t, oa), d_ob = test::upload(t, ob),
                 d_la = test::upload(DType::fp32, la), d_lb = test::upload(DType::fp32, lb);
    cuda::lse_merge(nullptr, t, cq, a, d, d_oa.get(), a * d, d_la.as<float>(), d_ob.get(), a * d,
                    d_lb.as<float>(), d_oa.get(), a * d, d_la.as<float>());
    std::vector<double> o(oa.size()), lse(la.size()), oad(oa.begin(), oa.end()),
        obd(ob.begin(), ob.end()), lad(la.begin(), la.end()), lbd(lb.begin(), lb.end());
    cpu::lse_merge<double>(cq, a, d, oad.data(), a * d, lad.data(), obd.data(), a * d, lbd.data(),
                           o.data(), a * d, lse.data());
    const auto got = test::download(t, d_oa, o.size());
    for (std::size_t e = 0; e < o.size(); ++e) {
      ASSERT_NEAR(got[e], o[e], test::storage_eps(t) * std::abs(o[e]) + 1e-6) << e;
    }
    expect_lse_close(test::download_raw<float>(d_la, lse.size()), lse);
  }
}

}  // namespace
}  // namespace suite::kernels

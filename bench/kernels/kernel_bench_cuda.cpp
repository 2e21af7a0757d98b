// GPU cases: cuBLAS GEMM and the flash attention kernel, timed with CUDA events around each
// iteration (manual time), after one untimed warm-up call.
#include <cuda_runtime.h>

#include <memory>

#include "bench/kernels/kernel_bench_common.hpp"
#include "kernels/attention/attention_cuda.hpp"
#include "kernels/core/bf16.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_buffer.hpp"
#include "kernels/gemm/gemm_cuda.hpp"

namespace suite::bench {
namespace {

using kernels::cuda::DeviceBuffer;

// Device buffer of n elements of storage type t holding a deterministic pattern in [-1, 1).
DeviceBuffer pattern(DType t, std::size_t n) {
  DeviceBuffer buf(n * dtype_size(t));
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i)
    f[i] = static_cast<float>((i * 7919) % 2000) / 1000.0f - 1;
  if (t == DType::bf16) {
    std::vector<bf16> h(n);
    for (std::size_t i = 0; i < n; ++i)
      h[i] = to_bf16(f[i]);
    SUITE_CUDA_CHECK(cudaMemcpy(buf.get(), h.data(), n * 2, cudaMemcpyHostToDevice));
  } else {
    SUITE_CUDA_CHECK(cudaMemcpy(buf.get(), f.data(), n * 4, cudaMemcpyHostToDevice));
  }
  return buf;
}

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    SUITE_CUDA_CHECK(cudaEventCreate(&start));
    SUITE_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

// Runs `launch` (enqueueing work on `stream`) once untimed, then once per iteration between
// two events; returns the summed seconds.
template <class F>
double timed_loop(benchmark::State& state, cudaStream_t stream, F&& launch) {
  Events ev;
  launch();
  SUITE_CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0;
  for (auto _ : state) {
    SUITE_CUDA_CHECK(cudaEventRecord(ev.start, stream));
    launch();
    SUITE_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    SUITE_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    float ms = 0;
    SUITE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    state.SetIterationTime(ms * 1e-3);
    total += ms * 1e-3;
  }
  return total;
}

void gemm_case(benchmark::State& state, DType t, std::int64_t n, double peak) {
  DeviceBuffer A = pattern(t, n * n), B = pattern(t, n * n), C(n * n * dtype_size(t));
  kernels::cuda::CublasHandle handle;
  const double total = timed_loop(state, nullptr, [&] {
    kernels::cuda::gemm(handle, nullptr, t, false, false, n, n, n, 1.0f, A.get(), n, B.get(), n,
                        0.0f, C.get(), n);
  });
  report_rate(state, 2.0 * n * n * n, total, peak);
}

void attention_case(benchmark::State& state, DType t, AttentionCase c, double peak) {
  const auto p =
      kernels::make_attention_params(c.s, c.s, c.heads, c.kv_heads, c.head_dim, c.causal);
  DeviceBuffer q = pattern(t, c.s * p.ld_q), k = pattern(t, c.s * p.ld_k),
               v = pattern(t, c.s * p.ld_v), o(c.s * p.ld_o * dtype_size(t)),
               lse(sizeof(float) * c.heads * c.s), pos(sizeof(std::int64_t) * c.s);
  std::vector<std::int64_t> hpos(c.s);
  for (std::int64_t i = 0; i < c.s; ++i)
    hpos[i] = i;
  SUITE_CUDA_CHECK(cudaMemcpy(pos.get(), hpos.data(), pos.bytes(), cudaMemcpyHostToDevice));
  const double total = timed_loop(state, nullptr, [&] {
    kernels::cuda::attention_forward(nullptr, t, p, q.get(), k.get(), v.get(),
                                     pos.as<std::int64_t>(), pos.as<std::int64_t>(), o.get(),
                                     lse.as<float>());
  });
  report_rate(state, attention_flops(c, hpos), total, peak);
}

}  // namespace

bool register_cuda_cases() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return false;
  }
  cudaDeviceProp prop{};
  SUITE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string device = prop.name;
  for (DType t : {DType::bf16, DType::fp32}) {
    const double peak = gpu_peak_flops(device, t);
    const std::string dt(dtype_name(t));
    for (std::int64_t n : {2048, 4096, 8192}) {
      benchmark::RegisterBenchmark(("gemm_cuda/" + dt + "/n" + std::to_string(n)).c_str(),
                                   [=](benchmark::State& s) { gemm_case(s, t, n, peak); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
    const AttentionCase cases[] = {{4096, 32, 32, 128, false},
                                   {4096, 32, 32, 128, true},
                                   {4096, 32, 8, 128, true},
                                   {8192, 16, 16, 64, true}};
    for (const AttentionCase& c : cases) {
      benchmark::RegisterBenchmark(("attention_cuda/" + dt + "/" + attention_case_name(c)).c_str(),
                                   [=](benchmark::State& s) { attention_case(s, t, c, peak); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::AddCustomContext("cuda_device", device);
  return true;
}

}  // namespace suite::bench

// CPU backend cases: blocked GEMM and the tiled fused attention.
#include <chrono>

#include "bench/kernels/kernel_bench_common.hpp"
#include "bench/kernels/kernel_results.hpp"
#include "kernels/attention/attention_cpu.hpp"
#include "kernels/gemm/gemm_cpu.hpp"

namespace suite::bench {
namespace {

using Clock = std::chrono::steady_clock;

template <class T>
std::vector<T> filled(std::size_t n, T scale) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<T>((i * 7919) % 1000) / T(1000);
  return v;
}

template <class T>
void gemm_case(benchmark::State& state, std::int64_t n, double peak) {
  const auto A = filled<T>(n * n, T(1)), B = filled<T>(n * n, T(-1));
  std::vector<T> C(n * n);
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    kernels::cpu::gemm<T>(false, false, n, n, n, 1, A.data(), n, B.data(), n, 0, C.data(), n);
    benchmark::DoNotOptimize(C.data());
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    set_iteration_time(state, dt);
    total += dt;
  }
  report_rate(state, 2.0 * n * n * n, total, peak);
}

template <class T>
void attention_case(benchmark::State& state, AttentionCase c, double peak) {
  const auto p =
      kernels::make_attention_params(c.s, c.s, c.heads, c.kv_heads, c.head_dim, c.causal);
  const auto q = filled<T>(c.s * p.ld_q, T(1)), k = filled<T>(c.s * p.ld_k, T(1)),
             v = filled<T>(c.s * p.ld_v, T(1));
  std::vector<T> o(c.s * p.ld_o), lse(c.heads * c.s);
  std::vector<std::int64_t> pos(c.s);
  for (std::int64_t i = 0; i < c.s; ++i)
    pos[i] = i;
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    kernels::cpu::attention_forward<T>(p, q.data(), k.data(), v.data(), pos.data(), pos.data(),
                                       o.data(), lse.data());
    benchmark::DoNotOptimize(o.data());
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    set_iteration_time(state, dt);
    total += dt;
  }
  report_rate(state, attention_flops(c, pos), total, peak);
}

}  // namespace

void register_cpu_cases(double peak) {
  for (std::int64_t n : {256, 512, 1024}) {
    register_kernel_case("gemm_cpu/fp32/n" + std::to_string(n), [=](benchmark::State& s) {
      gemm_case<float>(s, n, peak);
    })->Unit(benchmark::kMillisecond);
    register_kernel_case("gemm_cpu/fp64/n" + std::to_string(n), [=](benchmark::State& s) {
      gemm_case<double>(s, n, peak / 2);
    })->Unit(benchmark::kMillisecond);
  }
  const AttentionCase cases[] = {{512, 8, 8, 64, false},
                                 {512, 8, 8, 64, true},
                                 {512, 8, 2, 128, true},
                                 {1024, 4, 4, 128, true}};
  for (const AttentionCase& c : cases) {
    register_kernel_case("attention_cpu/fp32/" + attention_case_name(c), [=](benchmark::State& s) {
      attention_case<float>(s, c, peak);
    })->Unit(benchmark::kMillisecond);
  }
}

}  // namespace suite::bench

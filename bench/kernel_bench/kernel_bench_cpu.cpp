// CPU backend cases: the suite's GEMM, the tiled fused attention forward and backward, and
// OpenBLAS's own single-thread SGEMM / DGEMM called directly as the peer every CPU rate is
// read against (counter x_openblas_gemm: this case's rate over the peer's at n = 1024).
#include <cblas.h>

#include <chrono>
#include <functional>

#include "bench/kernel_bench/kernel_bench_common.hpp"
#include "bench/kernel_bench/kernel_results.hpp"
#include "kernels/attention/attention_cpu.hpp"
#include "kernels/core/blas_cpu.hpp"
#include "kernels/gemm/gemm_cpu.hpp"

namespace suite::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The peer's rate (fp32, fp64) once its n = 1024 case has run (it is registered first).
struct PeerRates {
  double fp32 = 0, fp64 = 0;
};
PeerRates& peer_rates() {
  static PeerRates rates;
  return rates;
}

template <class T>
double& peer_rate() {
  return std::is_same_v<T, float> ? peer_rates().fp32 : peer_rates().fp64;
}

template <class T>
std::vector<T> filled(std::size_t n, T scale) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<T>((i * 7919) % 1000) / T(1000);
  return v;
}

// Times `body` per iteration, reports the rate and, where the peer has run, the ratio to it.
template <class T>
double timed_rate(benchmark::State& state, double flops, double peak,
                  const std::function<void()>& body, bool is_peer = false) {
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    body();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    set_iteration_time(state, dt);
    total += dt;
  }
  report_rate(state, flops, total, peak);
  const double rate = total > 0 ? flops * static_cast<double>(state.iterations()) / total : 0.0;
  if (!is_peer && peer_rate<T>() > 0) state.counters["x_openblas_gemm"] = rate / peer_rate<T>();
  return rate;
}

template <class T>
void openblas_gemm_case(benchmark::State& state, std::int64_t n, double peak) {
  const auto A = filled<T>(n * n, T(1)), B = filled<T>(n * n, T(-1));
  std::vector<T> C(n * n);
  kernels::cpu::blas_threads();  // the suite's one-thread default applies to the peer too
  const auto N = static_cast<blasint>(n);
  const double rate = timed_rate<T>(
      state, 2.0 * n * n * n, peak,
      [&] {
        if constexpr (std::is_same_v<T, float>)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.f, A.data(), N,
                      B.data(), N, 0.f, C.data(), N);
        else
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, A.data(), N,
                      B.data(), N, 0.0, C.data(), N);
        benchmark::DoNotOptimize(C.data());
      },
      /*is_peer=*/true);
  if (n == 1024) peer_rate<T>() = rate;
  state.SetLabel("gemm_library=" + kernels::cpu::blas_library_version());
}

template <class T>
void gemm_case(benchmark::State& state, std::int64_t n, double peak) {
  const auto A = filled<T>(n * n, T(1)), B = filled<T>(n * n, T(-1));
  std::vector<T> C(n * n);
  timed_rate<T>(state, 2.0 * n * n * n, peak, [&] {
    kernels::cpu::gemm<T>(false, false, n, n, n, 1, A.data(), n, B.data(), n, 0, C.data(), n);
    benchmark::DoNotOptimize(C.data());
  });
  state.SetLabel("gemm_library=" + kernels::cpu::blas_library_version());
}

// One attention problem: q, k, v, a gradient d_o, and the forward's o, lse and delta.
template <class T>
struct AttentionData {
  kernels::AttentionParams p;
  std::vector<T> q, k, v, d_o, o, lse, delta;
  std::vector<std::int64_t> pos;
  explicit AttentionData(const AttentionCase& c)
      : p(kernels::make_attention_params(c.s, c.s, c.heads, c.kv_heads, c.head_dim, c.causal)),
        q(filled<T>(c.s * p.ld_q, T(1))),
        k(filled<T>(c.s * p.ld_k, T(1))),
        v(filled<T>(c.s * p.ld_v, T(1))),
        d_o(filled<T>(c.s * p.ld_o, T(-1))),
        o(c.s * p.ld_o),
        lse(c.heads * c.s),
        delta(c.heads * c.s),
        pos(c.s) {
    for (std::int64_t i = 0; i < c.s; ++i)
      pos[i] = i;
  }
  void forward() {
    kernels::cpu::attention_forward<T>(p, q.data(), k.data(), v.data(), pos.data(), pos.data(),
                                       o.data(), lse.data());
  }
};

template <class T>
void attention_case(benchmark::State& state, AttentionCase c, double peak) {
  AttentionData<T> x(c);
  timed_rate<T>(state, attention_flops(c, x.pos), peak, [&] {
    x.forward();
    benchmark::DoNotOptimize(x.o.data());
  });
  state.SetLabel("attn_kernel=cpu-tiled attn_library=" + kernels::cpu::blas_library_version());
}

// The backward from the forward's statistics (computed once, untimed), as a training step
// runs it: delta = rowsum(dO o), then the gradients into zeroed accumulators.
template <class T>
void attention_bwd_case(benchmark::State& state, AttentionCase c, double peak) {
  AttentionData<T> x(c);
  x.forward();
  std::vector<T> dq(x.q.size()), dk(x.k.size()), dv(x.v.size());
  timed_rate<T>(state, attention_bwd_flops(c, x.pos), peak, [&] {
    std::fill(dq.begin(), dq.end(), T(0));
    std::fill(dk.begin(), dk.end(), T(0));
    std::fill(dv.begin(), dv.end(), T(0));
    kernels::cpu::attention_backward_delta<T>(c.s, c.heads, c.head_dim, x.o.data(), x.d_o.data(),
                                              x.p.ld_o, x.delta.data());
    kernels::cpu::attention_backward<T>(x.p, x.q.data(), x.k.data(), x.v.data(), x.d_o.data(),
                                        x.lse.data(), x.delta.data(), x.pos.data(), x.pos.data(),
                                        dq.data(), dk.data(), dv.data());
    benchmark::DoNotOptimize(dq.data());
  });
  state.SetLabel("attn_kernel=cpu-tiled attn_library=" + kernels::cpu::blas_library_version());
}

}  // namespace

void register_cpu_cases(double peak) {
  // The peer first, so every later case can be read against it.
  for (std::int64_t n : {256, 1024}) {
    register_kernel_case("openblas_gemm/fp32/n" + std::to_string(n), [=](benchmark::State& s) {
      openblas_gemm_case<float>(s, n, peak);
    })->Unit(benchmark::kMillisecond);
    register_kernel_case("openblas_gemm/fp64/n" + std::to_string(n), [=](benchmark::State& s) {
      openblas_gemm_case<double>(s, n, peak / 2);
    })->Unit(benchmark::kMillisecond);
  }
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
  for (const AttentionCase& c : cases) {
    register_kernel_case("attention_bwd_cpu/fp32/" + attention_case_name(c),
                         [=](benchmark::State& s) { attention_bwd_case<float>(s, c, peak); })
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace suite::bench

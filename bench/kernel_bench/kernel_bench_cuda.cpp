// GPU cases: cuBLASLt GEMM and the attention engines (the suite's flash kernel, cuDNN's SDPA),
// forward and backward, timed with CUDA events around each iteration (manual time), after one
// untimed warm-up call (which also builds and caches cuDNN's graph for the shape).
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernel_bench/kernel_bench_common.hpp"
#include "bench/kernel_bench/kernel_results.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/core/bf16.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_buffer.hpp"
#include "kernels/gemm/gemm_lt.hpp"

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
    set_iteration_time(state, ms * 1e-3);
    total += ms * 1e-3;
  }
  return total;
}

void gemm_case(benchmark::State& state, DType t, std::int64_t n, double peak) {
  DeviceBuffer A = pattern(t, n * n), B = pattern(t, n * n), C(n * n * dtype_size(t));
  kernels::cuda::GemmLt lt;
  const double total = timed_loop(state, nullptr, [&] {
    lt.gemm(nullptr, t, false, false, n, n, n, 1.0f, A.get(), n, B.get(), n, 0.0f, C.get(), n);
  });
  report_rate(state, 2.0 * n * n * n, total, peak);
  state.counters["gemm_fallbacks"] = static_cast<double>(lt.fallbacks());
  state.SetLabel("gemm_library=" + kernels::cuda::GemmLt::library_version() +
                 (lt.fallbacks() > 0 ? " (cuBLAS fallback)" : ""));
}

// What both directions of an attention case run on: the engine; the block, whose query and key
// blocks hold the same positions 0..s-1 (host and device copies), so that the causal mask is the
// top-left diagonal; q, k and v holding the pattern; room for o and lse.
struct AttentionSetup {
  AttentionSetup(DType t, const AttentionCase& c, kernels::AttnKernelChoice choice)
      : engine(kernels::make_cuda_attention_engine(nullptr, t, choice)),
        p(kernels::make_attention_params(c.s, c.s, c.heads, c.kv_heads, c.head_dim, c.causal)),
        mask(c.causal ? kernels::BlockMask::causal_top_left : kernels::BlockMask::full),
        hpos(c.s),
        q(pattern(t, c.s * p.ld_q)),
        k(pattern(t, c.s * p.ld_k)),
        v(pattern(t, c.s * p.ld_v)),
        o(c.s * p.ld_o * dtype_size(t)),
        lse(sizeof(float) * c.heads * c.s),
        pos(sizeof(std::int64_t) * c.s) {
    for (std::int64_t i = 0; i < c.s; ++i)
      hpos[i] = i;
    SUITE_CUDA_CHECK(cudaMemcpy(pos.get(), hpos.data(), pos.bytes(), cudaMemcpyHostToDevice));
  }

  // The engine's fallbacks, kernel and library on the case's row.
  void label(benchmark::State& state) const {
    state.counters["attn_fallbacks"] = static_cast<double>(engine->fallbacks());
    state.SetLabel("attn_kernel=" + engine->name() + " attn_library=" + engine->library_version());
  }

  std::unique_ptr<kernels::AttentionEngine> engine;
  kernels::AttentionParams p;
  kernels::BlockMask mask;
  std::vector<std::int64_t> hpos;
  DeviceBuffer q, k, v, o, lse, pos;
};

void attention_case(benchmark::State& state, DType t, AttentionCase c,
                    kernels::AttnKernelChoice choice, double peak) {
  AttentionSetup a(t, c, choice);
  const auto* pos = a.pos.as<std::int64_t>();
  const double total = timed_loop(state, nullptr, [&] {
    a.engine->forward(a.p, a.mask, a.q.get(), a.k.get(), a.v.get(), pos, pos, a.o.get(),
                      a.lse.get());
  });
  report_rate(state, attention_flops(c, a.hpos), total, peak);
  a.label(state);
}

// The backward as a training step runs it, from the forward's o and lse (computed once,
// untimed): delta = rowsum(dO o), then one block's gradients added into zeroed fp32
// accumulators (the zeroing is timed too, as in the CPU case). cuDNN's graph computes its own
// delta from O and dO; the engine's delta call is the suite kernel's (and the fallback's) input.
void attention_bwd_case(benchmark::State& state, DType t, AttentionCase c,
                        kernels::AttnKernelChoice choice, double peak) {
  AttentionSetup a(t, c, choice);
  const kernels::AttentionParams& p = a.p;
  DeviceBuffer d_o = pattern(t, c.s * p.ld_o), delta(sizeof(float) * c.heads * c.s),
               dq(sizeof(float) * c.s * p.ld_q), dk(sizeof(float) * c.s * p.ld_k),
               dv(sizeof(float) * c.s * p.ld_v);
  const auto* pos = a.pos.as<std::int64_t>();
  a.engine->forward(p, a.mask, a.q.get(), a.k.get(), a.v.get(), pos, pos, a.o.get(), a.lse.get());
  const double total = timed_loop(state, nullptr, [&] {
    for (const DeviceBuffer* g : {&dq, &dk, &dv})
      SUITE_CUDA_CHECK(cudaMemsetAsync(g->get(), 0, g->bytes(), nullptr));
    a.engine->backward_delta(c.s, c.heads, c.head_dim, a.o.get(), d_o.get(), p.ld_o, delta.get());
    a.engine->backward(p, a.mask, a.q.get(), a.k.get(), a.v.get(), a.o.get(), d_o.get(),
                       a.lse.get(), delta.get(), pos, pos, dq.get(), dk.get(), dv.get());
  });
  report_rate(state, attention_bwd_flops(c, a.hpos), total, peak);
  a.label(state);
}

// The engines --attn-kernel names, resolved for bf16 (the only storage cuDNN takes): one
// choice per distinct engine. Throws std::invalid_argument when cudnn is named and missing.
std::vector<std::pair<kernels::AttnKernelChoice, std::string>> resolve_kernels(
    const std::vector<std::string>& names) {
  std::vector<std::pair<kernels::AttnKernelChoice, std::string>> out;
  auto add = [&](kernels::AttnKernelChoice c, bool required) {
    std::string name;
    try {
      name = kernels::make_cuda_attention_engine(nullptr, DType::bf16, c)->name();
    } catch (const std::invalid_argument&) {
      if (required) throw;
      return;
    }
    for (const auto& [choice, n] : out)
      if (n == name) return;
    out.emplace_back(c, name);
  };
  for (const auto& n : names) {
    if (n == "all") {
      add(kernels::AttnKernelChoice::suite, true);
      add(kernels::AttnKernelChoice::cudnn, false);
    } else {
      add(*kernels::parse_attn_kernel(n), true);
    }
  }
  return out;
}

}  // namespace

std::string register_cuda_cases(const std::vector<std::string>& attn_kernels) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return "";
  }
  cudaDeviceProp prop{};
  SUITE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string device = prop.name;
  const auto kernels_bf16 = resolve_kernels(attn_kernels);
  auto add_attention = [&](DType t, kernels::AttnKernelChoice choice, const std::string& kernel,
                           const AttentionCase& c, double peak, double min_time = 0) {
    auto* b =
        register_kernel_case("attention_cuda/" + std::string(dtype_name(t)) + "/" + kernel + "/" +
                                 attention_case_name(c),
                             [=](benchmark::State& s) { attention_case(s, t, c, choice, peak); });
    b->Unit(benchmark::kMillisecond);
    if (min_time > 0) b->MinTime(min_time);
  };
  for (DType t : {DType::bf16, DType::fp32}) {
    const double peak = gpu_peak_flops(device, t);
    const std::string dt(dtype_name(t));
    for (std::int64_t n : {2048, 4096, 8192}) {
      register_kernel_case("gemm_cuda/" + dt + "/n" + std::to_string(n), [=](benchmark::State& s) {
        gemm_case(s, t, n, peak);
      })->Unit(benchmark::kMillisecond);
    }
    // The shapes of the comparison with PyTorch (scripts/peers/torch_peer.py uses the same).
    const AttentionCase cases[] = {{4096, 32, 32, 128, false},
                                   {4096, 32, 32, 128, true},
                                   {4096, 32, 8, 128, true},
                                   {8192, 16, 16, 64, true}};
    // fp32 storage runs the suite's kernel only (cuDNN's SDPA takes bf16).
    const std::vector<std::pair<kernels::AttnKernelChoice, std::string>> kernels_t =
        t == DType::bf16 ? kernels_bf16
                         : std::vector<std::pair<kernels::AttnKernelChoice, std::string>>{
                               {kernels::AttnKernelChoice::suite, "suite-flash"}};
    for (const auto& [choice, kernel] : kernels_t) {
      for (const AttentionCase& c : cases)
        add_attention(t, choice, kernel, c, peak);
    }
    // The backward beside the forward: the same shapes and engines (no s sweep: the suite's
    // simple kernel would spend the GPU check's budget there).
    for (const auto& [choice, kernel] : kernels_t) {
      for (const AttentionCase& c : cases) {
        register_kernel_case(
            "attention_bwd_cuda/" + dt + "/" + kernel + "/" + attention_case_name(c),
            [=, choice = choice](benchmark::State& s) {
              attention_bwd_case(s, t, c, choice, peak);
            })
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  // The s sweep (bf16, causal): where each kernel reaches its plateau, and the F of c >= F/W
  // for the sequence lengths ring attention splits.
  const double peak_bf16 = gpu_peak_flops(device, DType::bf16);
  for (const auto& [choice, kernel] : kernels_bf16) {
    for (int d : {64, 128}) {
      for (std::int64_t s : {1024, 2048, 4096, 8192, 16384, 32768}) {
        const int heads = d == 64 ? 32 : 16;
        // 0.2 s per case keeps the 24 sweep cases within gpu_check.sh's kernel_bench budget.
        add_attention(DType::bf16, choice, kernel, {s, heads, heads, d, true}, peak_bf16, 0.2);
      }
    }
  }
  benchmark::AddCustomContext("cuda_device", device);
  return device;
}

}  // namespace suite::bench

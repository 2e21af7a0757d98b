// The FlashAttention-2-style tensor-core kernel (bf16, sm_80+: A100, H100/H200): mma.sync
// m16n8k16 with fp32 accumulation. Its body is flash_mma_block.hpp, written against a
// hardware policy; this file supplies the GPU policy (inline PTX) and the launch. The CPU
// tests run the same body through an emulated policy.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/attention/flash_mma_block.hpp"
#include "kernels/core/cuda_check.hpp"

namespace suite::kernels::cuda {
namespace {

using flash_mma::kBr;
using flash_mma::kThreads;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The primitives flash_mma::block uses, as PTX (sm_80+; the kernel traps on older devices and
// is launched only on sm_80+).
struct PtxHw {
  using Elem = __nv_bfloat16;

  // 16 bytes global -> shared, bypassing L1; src_bytes = 0 writes zeros (rows past the end).
  static __device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
                 "r"(src_bytes));
#endif
  }
  static __device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
  }
  template <int N>
  static __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
  }
  static __device__ __forceinline__ void sync_threads() {
    __syncthreads();
  }
  static __device__ __forceinline__ float shfl_xor(float v, int mask) {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
  static __device__ __forceinline__ std::int64_t shfl_xor(std::int64_t v, int mask) {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }

  // c += a b for one m16n8k16 tile (a: 4 registers of bf16 pairs, b: 2).
  static __device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }

  // Four 8x8 bf16 matrices, transposed: lanes 8m..8m+7 give the row addresses of matrix m;
  // r[m] receives, for lane (g, t), elements (2t, g) and (2t + 1, g) of matrix m.
  static __device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row_addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
#endif
  }

  static __device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    return *reinterpret_cast<const unsigned*>(&v);
  }
  static __device__ __forceinline__ unsigned lds32(const Elem* p) {
    return *reinterpret_cast<const unsigned*>(p);
  }
  static __device__ __forceinline__ void store32(Elem* p, unsigned v) {
    *reinterpret_cast<unsigned*>(p) = v;
  }
  static __device__ __forceinline__ void store_lse(float* p, float v) {
    *p = v;
  }
};

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_mma_kernel(AttentionParams p, float scale_log2, const __nv_bfloat16* __restrict__ q,
                     const __nv_bfloat16* __restrict__ k, const __nv_bfloat16* __restrict__ v,
                     const std::int64_t* __restrict__ q_pos, const std::int64_t* __restrict__ k_pos,
                     __nv_bfloat16* __restrict__ o, float* __restrict__ lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Last query tile first: under a causal mask it sees the most keys, so starting the
  // heaviest blocks early shortens the tail of the grid (FlashAttention-2 orders them so too).
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  flash_mma::block<D, PtxHw>(p, scale_log2, q, k, v, q_pos, k_pos, o, lse, smem_raw,
                             static_cast<int>(threadIdx.x), query_tile,
                             static_cast<int>(blockIdx.y));
#else
  __trap();  // launched only on sm_80+ (checked on the host)
#endif
}

template <int D>
void launch(cudaStream_t stream, const AttentionParams& p, const void* q, const void* k,
            const void* v, const std::int64_t* q_pos, const std::int64_t* k_pos, void* o,
            float* lse) {
  constexpr int smem = flash_mma::smem_bytes<D>();
  auto* kernel = flash_mma_kernel<D>;
  // Once per device and head dim: the ring launches this kernel many times per step.
  thread_local int opted_in_device = -1;
  int dev = 0;
  SUITE_CUDA_CHECK(cudaGetDevice(&dev));
  if (opted_in_device != dev) {
    SUITE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    opted_in_device = dev;
  }
  const dim3 grid(static_cast<unsigned>(tile_count(p.cq, kBr)), static_cast<unsigned>(p.heads));
  const float scale_log2 = static_cast<float>(p.softmax_scale) * flash_mma::kLog2e;
  kernel<<<grid, kThreads, smem, stream>>>(
      p, scale_log2, static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
      static_cast<const __nv_bfloat16*>(v), q_pos, k_pos, static_cast<__nv_bfloat16*>(o), lse);
  SUITE_CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

// Compute capability of the current device, major * 10 + minor (asked once per device).
int current_sm() {
  thread_local int cached_device = -1, cached_sm = 0;
  int dev = 0;
  SUITE_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev == cached_device) return cached_sm;
  int major = 0, minor = 0;
  SUITE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  SUITE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  cached_device = dev;
  cached_sm = major * 10 + minor;
  return cached_sm;
}

}  // namespace

bool attention_forward_mma_applicable(const AttentionParams& p, const void* q, const void* k,
                                      const void* v, const void* o) {
  for (std::int64_t ld : {p.ld_q, p.ld_k, p.ld_v, p.ld_o}) {
    if (ld % 8 != 0) return false;
  }
  if (!(aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o))) return false;
  return current_sm() >= 80;
}

void attention_forward_mma(cudaStream_t stream, const AttentionParams& p, const void* q,
                           const void* k, const void* v, const std::int64_t* q_pos,
                           const std::int64_t* k_pos, void* o, float* lse) {
  validate_attention(p);
  if (p.cq == 0) return;
  if (p.heads > 65535) throw std::invalid_argument("cuda::attention_forward_mma: heads > 65535");
  if (tile_count(p.cq, kBr) > 2147483647)
    throw std::invalid_argument("cuda::attention_forward_mma: too many queries");
  if (p.head_dim == 64) {
    launch<64>(stream, p, q, k, v, q_pos, k_pos, o, lse);
  } else {
    launch<128>(stream, p, q, k, v, q_pos, k_pos, o, lse);
  }
}

}  // namespace suite::kernels::cuda

// Attention backward on the GPU: delta = rowsum(dO o), the suite's simple backward kernel (its
// body is attention_backward_block.hpp, which the CPU tests run through the SIMT emulator),
// and the accumulation kernels the engines use to add a block's gradients into their fp32
// accumulators (or a bf16 partial sum). Every launch is checked.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/attention/attention_backward_block.hpp"
#include "kernels/attention/attention_cuda.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"

namespace suite::kernels::cuda {
namespace {

using attn_bwd::kBr;

// The two primitives attn_bwd::block needs.
struct DeviceHw {
  static __device__ __forceinline__ void sync_threads() { __syncthreads(); }
  static __device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
};

template <class S, int D>
__global__ void __launch_bounds__(kBr)
    backward_kernel(AttentionParams p, const S* __restrict__ q, const S* __restrict__ k,
                    const S* __restrict__ v, const S* __restrict__ d_o,
                    const float* __restrict__ lse, const float* __restrict__ delta,
                    const std::int64_t* __restrict__ q_pos, const std::int64_t* __restrict__ k_pos,
                    float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Last query tile first: under a causal mask it sees the most keys (as the forward does).
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  attn_bwd::block<S, D, DeviceHw>(p, q, k, v, d_o, lse, delta, q_pos, k_pos, dq, dk, dv, smem_raw,
                                  static_cast<int>(threadIdx.x), query_tile,
                                  static_cast<int>(blockIdx.y));
}

template <class S, int D>
void launch_backward(cudaStream_t stream, const AttentionParams& p, const void* q, const void* k,
                     const void* v, const void* d_o, const float* lse, const float* delta,
                     const std::int64_t* q_pos, const std::int64_t* k_pos, float* dq, float* dk,
                     float* dv) {
  constexpr std::size_t smem = attn_bwd::SmemLayout<S, D>::bytes;
  auto* kernel = backward_kernel<S, D>;
  // Above 48 KiB dynamic shared memory must be opted into, once per device and instantiation
  // (a ring launches this kernel many times per step).
  thread_local int opted_in_device = -1;
  int dev = 0;
  SUITE_CUDA_CHECK(cudaGetDevice(&dev));
  if (opted_in_device != dev) {
    SUITE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
    opted_in_device = dev;
  }
  const dim3 grid(static_cast<unsigned>(tile_count(p.cq, kBr)), static_cast<unsigned>(p.heads));
  kernel<<<grid, kBr, smem, stream>>>(p, static_cast<const S*>(q), static_cast<const S*>(k),
                                      static_cast<const S*>(v), static_cast<const S*>(d_o), lse,
                                      delta, q_pos, k_pos, dq, dk, dv);
  SUITE_CUDA_CHECK_LAUNCH();
}

constexpr int kWarpsPerBlock = 8;

// delta[h * cq + i] = sum_c d_o[i, h, c] o[i, h, c]: one warp per (head, query).
template <class S>
__global__ void delta_kernel(std::int64_t cq, int heads, int head_dim, const S* __restrict__ o,
                             const S* __restrict__ d_o, std::int64_t ld_o,
                             float* __restrict__ delta) {
  const std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (w >= cq * heads) return;  // whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int h = static_cast<int>(w / cq);
  const std::int64_t i = w - static_cast<std::int64_t>(h) * cq;
  const std::int64_t base = i * ld_o + static_cast<std::int64_t>(h) * head_dim;
  float s = 0.0f;
  for (int c = lane; c < head_dim; c += 32)
    s += load_f32(o, base + c) * load_f32(d_o, base + c);
  for (int off = 16; off > 0; off >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) delta[w] = s;
}

constexpr int kAccThreads = 256;
constexpr std::int64_t kAccMaxBlocks = 4096;  // grid-stride beyond this

// dst[r * ld_dst + c] += src[r * ld_src + c] for r < rows, c < cols (contiguous when
// ld = cols): the elements of a row-strided view only, never the padding between rows.
template <class Dst, class Src>
__global__ void accumulate_kernel(Dst* __restrict__ dst, std::int64_t ld_dst,
                                  const Src* __restrict__ src, std::int64_t ld_src,
                                  std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const bool dense = ld_dst == cols && ld_src == cols;  // no 64-bit division per element
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    if (dense) {
      add_f32(dst, e, load_f32(src, e));
    } else {
      const std::int64_t r = e / cols, c = e - r * cols;
      add_f32(dst, r * ld_dst + c, load_f32(src, r * ld_src + c));
    }
  }
}

template <class Dst, class Src>
void launch_accumulate(cudaStream_t stream, Dst* dst, std::int64_t ld_dst, const Src* src,
                       std::int64_t ld_src, std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  if (n <= 0) return;
  std::int64_t blocks = (n + kAccThreads - 1) / kAccThreads;
  if (blocks > kAccMaxBlocks) blocks = kAccMaxBlocks;
  accumulate_kernel<Dst, Src><<<static_cast<unsigned>(blocks), kAccThreads, 0, stream>>>(
      dst, ld_dst, src, ld_src, rows, cols);
  SUITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_backward_delta(cudaStream_t stream, DType dtype, std::int64_t cq, int heads,
                              int head_dim, const void* o, const void* d_o, std::int64_t ld_o,
                              float* delta) {
  if (cq < 0 || heads <= 0 || head_dim <= 0 || ld_o < static_cast<std::int64_t>(heads) * head_dim)
    throw std::invalid_argument("cuda::attention_backward_delta: bad shape");
  const std::int64_t rows = cq * heads;
  if (rows == 0) return;
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 2147483647)
    throw std::invalid_argument("cuda::attention_backward_delta: too many rows");
  dispatch_storage(dtype, "cuda::attention_backward_delta", [&](auto tag) {
    using S = decltype(tag);
    delta_kernel<S><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(
        cq, heads, head_dim, static_cast<const S*>(o), static_cast<const S*>(d_o), ld_o, delta);
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void attention_backward(cudaStream_t stream, DType dtype, const AttentionParams& p, const void* q,
                        const void* k, const void* v, const void* d_o, const float* lse,
                        const float* delta, const std::int64_t* q_pos, const std::int64_t* k_pos,
                        float* dq, float* dk, float* dv) {
  validate_attention(p);
  if (p.heads > 65535) throw std::invalid_argument("cuda::attention_backward: heads > 65535");
  if (tile_count(p.cq, kBr) > 2147483647)
    throw std::invalid_argument("cuda::attention_backward: too many queries");
  if (p.cq == 0 || p.ck == 0) return;  // nothing to add
  dispatch_storage(dtype, "cuda::attention_backward", [&](auto tag) {
    using S = decltype(tag);
    if (p.head_dim == 64) {
      launch_backward<S, 64>(stream, p, q, k, v, d_o, lse, delta, q_pos, k_pos, dq, dk, dv);
    } else {
      launch_backward<S, 128>(stream, p, q, k, v, d_o, lse, delta, q_pos, k_pos, dq, dk, dv);
    }
  });
}

void accumulate(cudaStream_t stream, void* dst, DType dst_type, const float* src, std::int64_t n) {
  if (n < 0) throw std::invalid_argument("cuda::accumulate: negative count");
  switch (dst_type) {
    case DType::fp32:
      launch_accumulate(stream, static_cast<float*>(dst), n, src, n, 1, n);
      return;
    case DType::bf16:
      launch_accumulate(stream, static_cast<bf16*>(dst), n, src, n, 1, n);
      return;
    case DType::fp64:
      break;
  }
  throw std::invalid_argument(
      "cuda::accumulate: the CUDA engines accumulate into fp32 or bf16, not " +
      std::string(dtype_name(dst_type)));
}

void accumulate_rows(cudaStream_t stream, float* dst, std::int64_t ld_dst, DType src_type,
                     const void* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0 || ld_dst < cols || ld_src < cols)
    throw std::invalid_argument("cuda::accumulate_rows: bad shape");
  dispatch_storage(src_type, "cuda::accumulate_rows", [&](auto tag) {
    using S = decltype(tag);
    launch_accumulate(stream, dst, ld_dst, static_cast<const S*>(src), ld_src, rows, cols);
  });
}

}  // namespace suite::kernels::cuda

// One thread per element of the destination, reading its source through the shared index
// helpers; the element is moved as an unsigned integer of its width, whatever its type.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/a2a/head_pack_cuda.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <class W, bool kPack>
__global__ void head_move_kernel(HeadPackShape s, const W* __restrict__ src, W* __restrict__ dst,
                                 std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[kPack ? pack_source_index(s, i) : unpack_source_index(s, i)];
}

// One thread per element of the unpacked gradient, summing its replicas in fp32.
template <class S>
__global__ void head_unpack_sum_kernel(HeadPackShape s, const S* __restrict__ src,
                                       S* __restrict__ dst, std::int64_t n) {
  const int replicas = unpack_replicas(s);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int r = 0; r < replicas; ++r)
      sum += load_f32(src, unpack_sum_source_index(s, i, r));
    store_f32(dst, i, sum);
  }
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t want = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(want < 65535 * 32 ? want : 65535 * 32);
}

template <bool kPack>
void launch(cudaStream_t stream, const HeadPackShape& s, std::size_t e, const void* src,
            void* dst) {
  validate_head_pack(s, !kPack);
  const std::int64_t n = kPack ? s.packed_elems() : s.unpacked_elems();
  if (n == 0) return;
  const std::int64_t want = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 32 ? want : 65535 * 32);
  switch (e) {
    case 2:
      head_move_kernel<std::uint16_t, kPack><<<blocks, kThreads, 0, stream>>>(
          s, static_cast<const std::uint16_t*>(src), static_cast<std::uint16_t*>(dst), n);
      break;
    case 4:
      head_move_kernel<std::uint32_t, kPack><<<blocks, kThreads, 0, stream>>>(
          s, static_cast<const std::uint32_t*>(src), static_cast<std::uint32_t*>(dst), n);
      break;
    case 8:
      head_move_kernel<std::uint64_t, kPack><<<blocks, kThreads, 0, stream>>>(
          s, static_cast<const std::uint64_t*>(src), static_cast<std::uint64_t*>(dst), n);
      break;
    default:
      throw std::invalid_argument("cuda head pack: element size " + std::to_string(e) +
                                  " unsupported (2, 4, 8)");
  }
  SUITE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void head_pack(cudaStream_t stream, const HeadPackShape& s, std::size_t e, const void* src,
               void* dst) {
  launch<true>(stream, s, e, src, dst);
}

void head_unpack(cudaStream_t stream, const HeadPackShape& s, std::size_t e, const void* src,
                 void* dst) {
  launch<false>(stream, s, e, src, dst);
}

void head_unpack_sum(cudaStream_t stream, const HeadPackShape& s, DType t, const void* src,
                     void* dst) {
  validate_head_pack(s, false);
  const std::int64_t n = s.unpacked_elems();
  if (n == 0) return;
  dispatch_storage(t, "cuda head_unpack_sum", [&](auto tag) {
    using S = decltype(tag);
    head_unpack_sum_kernel<S><<<grid_for(n), kThreads, 0, stream>>>(s, static_cast<const S*>(src),
                                                                    static_cast<S*>(dst), n);
  });
  SUITE_CUDA_CHECK_LAUNCH();
}

}  // namespace suite::kernels::cuda

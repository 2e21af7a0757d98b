// LSE merge on the GPU: one warp per (head, query) so the lse of a row is read by all lanes
// before lane 0 overwrites it (lse may alias an input).
#include <cstdint>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/attention/lse_merge.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

template <class S>
__global__ void lse_merge_kernel(std::int64_t cq, int heads, int head_dim, const S* o_a,
                                 std::int64_t ld_a, const float* lse_a, const S* o_b,
                                 std::int64_t ld_b, const float* lse_b, S* o, std::int64_t ld_o,
                                 float* lse) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= cq * heads) return;  // whole warp leaves together
  const int lane = threadIdx.x % 32;
  const int h = static_cast<int>(row / cq);
  const std::int64_t i = row - static_cast<std::int64_t>(h) * cq;
  const MergeWeights<float> w = merge_weights(lse_a[row], lse_b[row]);
  __syncwarp();
  if (lane == 0) lse[row] = w.lse;
  for (int c = lane; c < head_dim; c += 32) {
    const float a = load_f32(o_a, i * ld_a + h * head_dim + c);
    const float b = load_f32(o_b, i * ld_b + h * head_dim + c);
    store_f32(o, i * ld_o + h * head_dim + c, weighted(w.w_a, a) + weighted(w.w_b, b));
  }
}

}  // namespace

void lse_merge(cudaStream_t stream, DType dtype, std::int64_t cq, int heads, int head_dim,
               const void* o_a, std::int64_t ld_a, const float* lse_a, const void* o_b,
               std::int64_t ld_b, const float* lse_b, void* o, std::int64_t ld_o, float* lse) {
  const std::int64_t rows = cq * heads;
  if (rows <= 0) return;
  const std::int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 2147483647) throw std::invalid_argument("cuda::lse_merge: too many rows");
  dispatch_storage(dtype, "cuda::lse_merge", [&](auto tag) {
    using S = decltype(tag);
    lse_merge_kernel<S><<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(
        cq, heads, head_dim, static_cast<const S*>(o_a), ld_a, lse_a, static_cast<const S*>(o_b),
        ld_b, lse_b, static_cast<S*>(o), ld_o, lse);
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace suite::kernels::cuda

// LayerNorm's row statistics on the GPU, shared by the forward and the backward (which
// recomputes them rather than saving them): mean and 1/sqrt(variance + eps) of one row, the
// variance from a second pass over x - mean as the CPU reference computes it. The whole block
// cooperates; every thread receives both.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/core/block_reduce.cuh"
#include "kernels/core/device_storage.hpp"

namespace suite::kernels::cuda {

struct RowStats {
  float mean, rstd;
};

// x[base, base + cols); scratch: one float per warp in shared memory.
template <class S>
__device__ inline RowStats layernorm_row_stats(const S* x, std::int64_t base, std::int64_t cols,
                                               float eps, float* scratch) {
  float sum = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    sum += load_f32(x, base + c);
  const float mean = block_sum(sum, scratch) / static_cast<float>(cols);
  float sq = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = load_f32(x, base + c) - mean;
    sq += d * d;
  }
  return {mean, rsqrtf(block_sum(sq, scratch) / static_cast<float>(cols) + eps)};
}

}  // namespace suite::kernels::cuda

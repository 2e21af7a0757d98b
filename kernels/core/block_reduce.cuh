// Block-wide reductions for kernels whose block size is a multiple of 32 (at most 1024).
// Every thread receives the result. `scratch` must hold one float per warp.
#pragma once

#include <cuda_runtime.h>

namespace suite::kernels::cuda {

template <class Op>
__device__ inline float block_reduce(float v, float* scratch, Op op) {
  for (int off = 16; off > 0; off >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x / 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (threadIdx.x % 32 == 0) scratch[warp] = v;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
    total = op(total, scratch[w]);
  return total;
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ inline float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, SumOp{});
}
__device__ inline float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, MaxOp{});
}

}  // namespace suite::kernels::cuda

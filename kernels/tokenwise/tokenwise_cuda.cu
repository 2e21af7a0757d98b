#include "kernels/tokenwise/tokenwise_cuda.hpp"

#include <stdexcept>

#include "kernels/core/block_reduce.cuh"
#include "kernels/core/counter_rng.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"
#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/layernorm_row_stats.cuh"
#include "kernels/tokenwise/silu.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kFlatThreads = 256;

template <class S>
__global__ void layernorm_kernel(std::int64_t cols, const S* x, const S* gamma, const S* beta,
                                 float eps, S* y) {
  __shared__ float scratch[kRowThreads / 32];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * cols;
  const auto [mean, rstd] = layernorm_row_stats(x, base, cols, eps, scratch);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = (load_f32(x, base + c) - mean) * rstd;
    store_f32(y, base + c, v * load_f32(gamma, c) + load_f32(beta, c));
  }
}

template <class S>
__global__ void gelu_kernel(std::int64_t n, const S* x, S* y) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    store_f32(y, i, gelu_tanh(load_f32(x, i)));
  }
}

template <class S>
__global__ void silu_mul_kernel(std::int64_t rows, std::int64_t cols, const S* x, S* y) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols, c = i - r * cols;
    store_f32(y, i,
              silu(load_f32(x, swiglu_gate_index(r, c, cols))) *
                  load_f32(x, swiglu_up_index(r, c, cols)));
  }
}

template <class S>
__global__ void residual_kernel(std::int64_t n, const S* x, const S* r, S* y) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    store_f32(y, i, load_f32(x, i) + load_f32(r, i));
  }
}

template <class S>
__global__ void dropout_kernel(std::int64_t rows, std::int64_t cols, std::uint32_t threshold,
                               float scale, std::uint64_t seed, std::int64_t row_offset, const S* x,
                               S* y, std::uint8_t* mask) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols;
    const bool keep = hidden_dropout_keep(seed, row_offset + r, i - r * cols, threshold);
    mask[i] = keep ? 1 : 0;
    store_f32(y, i, keep ? load_f32(x, i) * scale : 0.0f);
  }
}

// Grid-stride launch size: enough blocks to fill any current GPU, capped for tiny inputs.
unsigned flat_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + kFlatThreads - 1) / kFlatThreads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

void layernorm_forward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                       const void* x, const void* gamma, const void* beta, float eps, void* y) {
  if (cols <= 0) throw std::invalid_argument("cuda::layernorm_forward: cols must be positive");
  if (rows > 2147483647) throw std::invalid_argument("cuda::layernorm_forward: too many rows");
  if (rows == 0) return;
  dispatch_storage(dtype, "cuda::layernorm_forward", [&](auto tag) {
    using S = decltype(tag);
    layernorm_kernel<S><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        cols, static_cast<const S*>(x), static_cast<const S*>(gamma), static_cast<const S*>(beta),
        eps, static_cast<S*>(y));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void gelu_forward(cudaStream_t stream, DType dtype, std::int64_t n, const void* x, void* y) {
  if (n <= 0) return;
  dispatch_storage(dtype, "cuda::gelu_forward", [&](auto tag) {
    using S = decltype(tag);
    gelu_kernel<S><<<flat_blocks(n), kFlatThreads, 0, stream>>>(n, static_cast<const S*>(x),
                                                                static_cast<S*>(y));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void silu_mul_forward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                      const void* x, void* y) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(dtype, "cuda::silu_mul_forward", [&](auto tag) {
    using S = decltype(tag);
    silu_mul_kernel<S><<<flat_blocks(rows * cols), kFlatThreads, 0, stream>>>(
        rows, cols, static_cast<const S*>(x), static_cast<S*>(y));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void residual_add(cudaStream_t stream, DType dtype, std::int64_t n, const void* x,
                  const void* residual, void* y) {
  if (n <= 0) return;
  dispatch_storage(dtype, "cuda::residual_add", [&](auto tag) {
    using S = decltype(tag);
    residual_kernel<S><<<flat_blocks(n), kFlatThreads, 0, stream>>>(
        n, static_cast<const S*>(x), static_cast<const S*>(residual), static_cast<S*>(y));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void dropout_forward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                     float p, std::uint64_t seed, std::int64_t row_offset, const void* x, void* y,
                     std::uint8_t* mask) {
  const std::uint32_t threshold = dropout_threshold(p);
  const float scale = 1.0f / (1.0f - p);
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(dtype, "cuda::dropout_forward", [&](auto tag) {
    using S = decltype(tag);
    dropout_kernel<S><<<flat_blocks(rows * cols), kFlatThreads, 0, stream>>>(
        rows, cols, threshold, scale, seed, row_offset, static_cast<const S*>(x),
        static_cast<S*>(y), mask);
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace suite::kernels::cuda

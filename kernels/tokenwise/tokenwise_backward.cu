// Backward of the token-wise ops on the GPU (bf16 or fp32 storage, fp32 arithmetic), beside
// the forwards in tokenwise_cuda.cu. Conservative kernels: one block per row for the row
// reductions, grid-stride loops for the element-wise ops, one thread per column for the
// LayerNorm weight gradients (rows summed in order, so the result is deterministic).
#include <stdexcept>
#include <string>

#include "kernels/core/block_reduce.cuh"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_storage.hpp"
#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/layernorm_row_stats.cuh"
#include "kernels/tokenwise/tokenwise_cuda.hpp"
#include "kernels/tokenwise/tokenwise_grad.hpp"

namespace suite::kernels::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int kFlatThreads = 256;
constexpr int kColumnThreads = 256;

template <class S>
__global__ void layernorm_backward_rows(std::int64_t cols, const S* x, const S* gamma, const S* dy,
                                        float eps, S* dx, float* stats) {
  __shared__ float scratch[kRowThreads / 32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t base = row_major_index(r, 0, cols);
  const auto [mean, rstd] = layernorm_row_stats(x, base, cols, eps, scratch);
  float sum_g = 0, sum_gx = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = load_f32(dy, base + c) * load_f32(gamma, c);
    sum_g += g;
    sum_gx += g * (load_f32(x, base + c) - mean) * rstd;
  }
  const float mean_g = block_sum(sum_g, scratch) / static_cast<float>(cols);
  const float mean_gx = block_sum(sum_gx, scratch) / static_cast<float>(cols);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = load_f32(dy, base + c) * load_f32(gamma, c);
    const float xhat = (load_f32(x, base + c) - mean) * rstd;
    store_f32(dx, base + c, layernorm_input_grad(g, xhat, mean_g, mean_gx, rstd));
  }
  if (threadIdx.x == 0) {
    stats[layernorm_mean_index(r)] = mean;
    stats[layernorm_rstd_index(r)] = rstd;
  }
}

template <class S>
__global__ void layernorm_backward_columns(std::int64_t rows, std::int64_t cols, const S* x,
                                           const S* dy, const float* stats, S* dgamma, S* dbeta) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float dg = 0, db = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = row_major_index(r, c, cols);
    const float xhat =
        (load_f32(x, i) - stats[layernorm_mean_index(r)]) * stats[layernorm_rstd_index(r)];
    const float d = load_f32(dy, i);
    dg += d * xhat;
    db += d;
  }
  store_f32(dgamma, c, dg);
  store_f32(dbeta, c, db);
}

template <class S>
__global__ void gelu_backward_kernel(std::int64_t n, const S* x, const S* dy, S* dx) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    store_f32(dx, i, load_f32(dy, i) * gelu_tanh_grad(load_f32(x, i)));
}

template <class S>
__global__ void dropout_backward_kernel(std::int64_t n, float scale, const std::uint8_t* mask,
                                        const S* dy, S* dx) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    store_f32(dx, i, dropout_grad(load_f32(dy, i), mask[i], scale));
}

template <class S>
__global__ void softmax_dropout_backward_kernel(std::int64_t cols, float scale, const S* probs,
                                                const std::uint8_t* mask, S* g) {
  __shared__ float scratch[kRowThreads / 32];
  const std::int64_t base = row_major_index(blockIdx.x, 0, cols);
  float dot = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dot += load_f32(probs, base + c) * dropout_grad(load_f32(g, base + c), mask[base + c], scale);
  dot = block_sum(dot, scratch);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = dropout_grad(load_f32(g, base + c), mask[base + c], scale);
    store_f32(g, base + c, softmax_grad(load_f32(probs, base + c), d, dot));
  }
}

unsigned flat_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + kFlatThreads - 1) / kFlatThreads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

void check_rows(std::int64_t rows, const char* what) {
  if (rows > 2147483647) throw std::invalid_argument(std::string(what) + ": too many rows");
}

}  // namespace

void layernorm_backward(cudaStream_t stream, DType dtype, std::int64_t rows, std::int64_t cols,
                        const void* x, const void* gamma, const void* dy, float eps, void* dx,
                        void* dgamma, void* dbeta, float* workspace) {
  if (cols <= 0) throw std::invalid_argument("cuda::layernorm_backward: cols must be positive");
  check_rows(rows, "cuda::layernorm_backward");
  dispatch_storage(dtype, "cuda::layernorm_backward", [&](auto tag) {
    using S = decltype(tag);
    if (rows > 0) {
      layernorm_backward_rows<S><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
          cols, static_cast<const S*>(x), static_cast<const S*>(gamma), static_cast<const S*>(dy),
          eps, static_cast<S*>(dx), workspace);
      SUITE_CUDA_CHECK_LAUNCH();
    }
    const auto blocks = static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads);
    layernorm_backward_columns<S><<<blocks, kColumnThreads, 0, stream>>>(
        rows, cols, static_cast<const S*>(x), static_cast<const S*>(dy), workspace,
        static_cast<S*>(dgamma), static_cast<S*>(dbeta));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void gelu_backward(cudaStream_t stream, DType dtype, std::int64_t n, const void* x, const void* dy,
                   void* dx) {
  if (n <= 0) return;
  dispatch_storage(dtype, "cuda::gelu_backward", [&](auto tag) {
    using S = decltype(tag);
    gelu_backward_kernel<S><<<flat_blocks(n), kFlatThreads, 0, stream>>>(
        n, static_cast<const S*>(x), static_cast<const S*>(dy), static_cast<S*>(dx));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void dropout_backward(cudaStream_t stream, DType dtype, std::int64_t n, float p,
                      const std::uint8_t* mask, const void* dy, void* dx) {
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - p);  // the forward's factor
  dispatch_storage(dtype, "cuda::dropout_backward", [&](auto tag) {
    using S = decltype(tag);
    dropout_backward_kernel<S><<<flat_blocks(n), kFlatThreads, 0, stream>>>(
        n, scale, mask, static_cast<const S*>(dy), static_cast<S*>(dx));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

void softmax_dropout_backward(cudaStream_t stream, DType dtype, std::int64_t rows,
                              std::int64_t cols, float p, const void* probs,
                              const std::uint8_t* mask, void* g) {
  if (rows <= 0 || cols <= 0) return;
  check_rows(rows, "cuda::softmax_dropout_backward");
  const float scale = 1.0f / (1.0f - p);
  dispatch_storage(dtype, "cuda::softmax_dropout_backward", [&](auto tag) {
    using S = decltype(tag);
    softmax_dropout_backward_kernel<S><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        cols, scale, static_cast<const S*>(probs), mask, static_cast<S*>(g));
    SUITE_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace suite::kernels::cuda

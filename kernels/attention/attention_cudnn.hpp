// cuDNN's fused SDPA forward and backward (through the cuDNN frontend's graph API) as an
// AttentionEngine.
// Only attention_cudnn.cpp includes the frontend (one slow translation unit); this header
// does not, so any file may include it. Built when CMake found cuDNN (SUITE_HAVE_CUDNN).
#pragma once

#if defined(SUITE_HAVE_CUDNN)
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/attention/attention_engine.hpp"

namespace suite::kernels::cuda {

// bf16 storage only. Blocks cuDNN cannot express (cudnn_support.hpp), and shapes for which
// cuDNN finds no engine, run on `fallback` (the suite's kernel) and count in fallbacks(),
// forward and backward blocks alike. Graphs (sdpa, sdpa_backward) are built once per distinct
// block (shape, strides, mask, scale) on first use and cached; call forward and backward once
// untimed per shape to keep building out of a timed loop. Gradients accumulate in fp32
// (grad_type); cuDNN's per-block dQ, dK, dV pass through bf16 scratch on the way.
// Throws std::runtime_error when cuDNN cannot start here (no device, library mismatch).
std::unique_ptr<AttentionEngine> make_cudnn_attention_engine(
    cudaStream_t stream, DType dtype, std::unique_ptr<AttentionEngine> fallback);

// "cudnn 9.19.0 (libcudnn.so.9 at <dir>; built against 9.19.0, frontend 1.32.0)": the runtime
// library actually loaded, so a results file says which cuDNN produced its numbers.
std::string cudnn_library_description();

}  // namespace suite::kernels::cuda
#endif

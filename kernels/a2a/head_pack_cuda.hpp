// Ulysses' head pack / unpack on the GPU (semantics as head_pack.hpp); device pointers,
// queued on `stream`.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/a2a/head_pack.hpp"

namespace suite::kernels::cuda {

void head_pack(cudaStream_t stream, const HeadPackShape& s, std::size_t elem_size, const void* src,
               void* dst);
void head_unpack(cudaStream_t stream, const HeadPackShape& s, std::size_t elem_size,
                 const void* src, void* dst);
// Gradients: the sum over each head's replicas (cpu::head_unpack_sum), bf16 or fp32.
void head_unpack_sum(cudaStream_t stream, const HeadPackShape& s, DType t, const void* src,
                     void* dst);

}  // namespace suite::kernels::cuda
#endif

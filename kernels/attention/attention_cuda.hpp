// Attention forward, backward and LSE merge on the GPU. All pointers are device pointers
// (q_pos and k_pos too); q, k, v, o, probs and probs_dropped use the storage `dtype` (bf16 or
// fp32), lse is fp32 [heads, cq]; arithmetic is fp32. Semantics match attention_cpu.hpp.
#pragma once

#if defined(SUITE_HAVE_CUDA)
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention_index.hpp"
#include "kernels/core/cublas_handle.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::kernels::cuda {

// Fused flash-style kernel: online softmax over K/V tiles staged in shared memory; the
// cq x ck score matrix is never materialised. bf16 on sm_80+: the tensor-core kernel below;
// otherwise (fp32, odd strides, older GPUs) the simple one-thread-per-row kernel. Throws
// std::invalid_argument for head_dim other than 64 or 128.
void attention_forward(cudaStream_t stream, DType dtype, const AttentionParams& p, const void* q,
                       const void* k, const void* v, const std::int64_t* q_pos,
                       const std::int64_t* k_pos, void* o, float* lse);

// The tensor-core (mma.sync, bf16) kernel behind attention_forward for bf16 storage: used
// when attention_forward_mma_applicable (device sm_80+, row strides multiples of 8 elements,
// q/k/v/o 16-byte aligned); attention_forward falls back to the simple kernel otherwise.
bool attention_forward_mma_applicable(const AttentionParams& p, const void* q, const void* k,
                                      const void* v, const void* o);
void attention_forward_mma(cudaStream_t stream, const AttentionParams& p, const void* q,
                           const void* k, const void* v, const std::int64_t* q_pos,
                           const std::int64_t* k_pos, void* o, float* lse);

// Unfused path: cuBLAS for q k^T and P V, one kernel for masked softmax + dropout. Fills
// probs, mask and probs_dropped ([heads, cq, ck] each; masks keyed by
// (seed, head_offset + h, q_pos, k_pos), bit-identical to the CPU), o and lse. The scores are
// written into `probs` in the storage type before the softmax reads them back in fp32
// (Megatron's unfused path rounds them the same way).
void attention_unfused(CublasHandle& handle, cudaStream_t stream, DType dtype,
                       const AttentionParams& p, float dropout_p, std::uint64_t seed,
                       int head_offset, const void* q, const void* k, const void* v,
                       const std::int64_t* q_pos, const std::int64_t* k_pos, void* probs,
                       std::uint8_t* mask, void* probs_dropped, void* o, float* lse);

// (o, lse) = merge((o_a, lse_a), (o_b, lse_b)); o may alias o_a/o_b, lse may alias
// lse_a/lse_b, so a running accumulator is updated in place.
void lse_merge(cudaStream_t stream, DType dtype, std::int64_t cq, int heads, int head_dim,
               const void* o_a, std::int64_t ld_a, const float* lse_a, const void* o_b,
               std::int64_t ld_b, const float* lse_b, void* o, std::int64_t ld_o, float* lse);

// Backward (METHODS.md section 5; semantics of cpu::attention_backward_delta / _backward).
// delta [heads, cq] (fp32) = rowsum(d_o * o) per query and head; o, d_o [cq, heads, head_dim]
// in the storage type with row stride ld_o (the final output and its gradient).
void attention_backward_delta(cudaStream_t stream, DType dtype, std::int64_t cq, int heads,
                              int head_dim, const void* o, const void* d_o, std::int64_t ld_o,
                              float* delta);

// The suite's simple backward kernel (attention_backward_block.hpp; fp32 arithmetic, no tensor
// cores): ADDS this key block's contributions into the fp32 accumulators dq (q's layout,
// p.ld_q), dk (p.ld_k) and dv (p.ld_v), given the FINAL lse and delta [heads, cq] (fp32) of
// the queries, so the contributions of disjoint key blocks sum to the full gradient. q, k, v,
// d_o (row stride p.ld_o) in the storage dtype (bf16 or fp32); masks from the global positions
// exactly as the forward; a query with lse = -inf contributes nothing. dk and dv are added
// with atomics (other query tiles and, with GQA, the other heads of a K/V head's group add
// into the same rows), so their low bits depend on the order the blocks run in.
void attention_backward(cudaStream_t stream, DType dtype, const AttentionParams& p, const void* q,
                        const void* k, const void* v, const void* d_o, const float* lse,
                        const float* delta, const std::int64_t* q_pos, const std::int64_t* k_pos,
                        float* dq, float* dk, float* dv);

// dst[i] += src[i] for n elements, dst of dst_type fp32 or bf16 (each sum rounded once, as the
// CPU engine does); throws std::invalid_argument for other types.
void accumulate(cudaStream_t stream, void* dst, DType dst_type, const float* src, std::int64_t n);

// dst[r * ld_dst + c] += src[r * ld_src + c] for r < rows, c < cols: src in src_type (bf16 or
// fp32), dst fp32; the padding between rows is never touched (a strided dst may be a view into
// a larger tensor).
void accumulate_rows(cudaStream_t stream, float* dst, std::int64_t ld_dst, DType src_type,
                     const void* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols);

}  // namespace suite::kernels::cuda
#endif

// One attention block (queries of one block against keys/values of one block) and the exact
// log-sum-exp merge, behind one interface whatever runs them: the CPU kernels, the suite's
// CUDA kernel, or a vendor library (cuDNN). Benchmarks (ring, Ulysses, the layer) hold an
// AttentionEngine and never call a backend's kernels directly, so --attn-kernel is one choice
// made in one place and recorded in every results file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/attention/attention_index.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::kernels {

// The structure of a block's mask, known to the caller from its layout. Kernels that read the
// global positions (CPU, suite) need only the positions; vendor kernels express the structure
// (cuDNN: no mask, causal top-left, causal bottom-right) and fall back to the suite's kernel
// for `positions` (any other pattern, e.g. a striped layout's strictly-lower diagonal).
enum class BlockMask {
  full,                 // every key visible to every query
  causal_top_left,      // key j visible to query i iff j <= i (same positions on both sides)
  causal_bottom_right,  // key j visible to query i iff j <= i + (ck - cq)
  positions,            // only the positions tell
};

std::string_view block_mask_name(BlockMask m);

// Visible (query, key) pairs of a cq x ck block whose mask has a structure (not `positions`), in
// O(1): what a kernel computes, for FLOP counts that need no positions. Throws
// std::invalid_argument for `positions`.
std::int64_t structured_visible_pairs(BlockMask m, std::int64_t cq, std::int64_t ck);

// --attn-kernel: auto (cuDNN when available on the cuda backend, else the suite's kernel),
// suite (the suite's own kernel), cudnn (fails when this build or machine has no cuDNN).
enum class AttnKernelChoice { automatic, suite, cudnn };

std::optional<AttnKernelChoice> parse_attn_kernel(std::string_view s);
std::string_view attn_kernel_choice_name(AttnKernelChoice c);

class AttentionEngine {
 public:
  virtual ~AttentionEngine() = default;
  // Which kernel runs: "cpu-tiled", "suite-flash", "cudnn" (recorded as attn_kernel).
  virtual std::string name() const = 0;
  // The library behind it ("cudnn 9.19.0"), or the suite's own ("suite").
  virtual std::string library_version() const = 0;
  // Bytes per lse element: the storage type on the CPU, fp32 on CUDA.
  virtual std::size_t lse_elem_size() const = 0;
  // o [cq, heads, d] (row stride p.ld_o) and lse [heads, cq] of queries q against k, v.
  // q_pos / k_pos are the global positions (device memory on CUDA); `mask` must describe the
  // same pattern as the positions (a kernel may use either). A query that sees no key gets
  // o = 0 and lse = -inf.
  virtual void forward(const AttentionParams& p, BlockMask mask, const void* q, const void* k,
                       const void* v, const std::int64_t* q_pos, const std::int64_t* k_pos, void* o,
                       void* lse) = 0;
  // (o, lse) = merge((o_a, lse_a), (o_b, lse_b)); o may alias o_a / o_b, lse likewise.
  virtual void merge(std::int64_t cq, int heads, int head_dim, const void* o_a, std::int64_t ld_a,
                     const void* lse_a, const void* o_b, std::int64_t ld_b, const void* lse_b,
                     void* o, std::int64_t ld_o, void* lse) = 0;
  // Backward (METHODS.md section 5). The element type of the gradient accumulators backward()
  // adds into: the storage type on the CPU, fp32 on CUDA.
  virtual DType grad_type() const = 0;
  // delta [heads, cq] (lse_elem_size() each) = rowsum(d_o * o) per query and head, o and d_o
  // [cq, heads, d] with row stride ld_o: the final output and its gradient.
  virtual void backward_delta(std::int64_t cq, int heads, int head_dim, const void* o,
                              const void* d_o, std::int64_t ld_o, void* delta) = 0;
  // Adds one block pair's gradient contributions into dq (q's layout, p.ld_q), dk (p.ld_k) and
  // dv (p.ld_v), accumulators of grad_type(). o and d_o (p.ld_o) are the FINAL output and its
  // gradient, lse and delta the final statistics [heads, cq], so the contributions of disjoint
  // key blocks add up to the full gradient (a ring computes them block by block). Masks and
  // positions as in forward(); a query that sees no key contributes nothing.
  virtual void backward(const AttentionParams& p, BlockMask mask, const void* q, const void* k,
                        const void* v, const void* o, const void* d_o, const void* lse,
                        const void* delta, const std::int64_t* q_pos, const std::int64_t* k_pos,
                        void* dq, void* dk, void* dv) = 0;
  // dst[i] += src[i] for n elements: src of grad_type(), dst of dst_type (e.g. the ring's
  // travelling partial sums when --grad-dtype differs from grad_type()). Throws
  // std::invalid_argument for a dst_type this engine cannot hold.
  virtual void accumulate(void* dst, DType dst_type, const void* src, std::int64_t n) = 0;
  // Blocks that the chosen kernel could not express and ran on the suite's kernel instead
  // (counted since construction).
  virtual std::int64_t fallbacks() const { return 0; }
  // Why the first fallback happened (empty when none did).
  virtual std::string fallback_reason() const { return {}; }
  // Called between query tiles by engines that compute on the host thread (the CPU one), so
  // a transfer that MPI progresses only inside MPI calls moves while attention computes.
  virtual void set_progress_hook(std::function<void()> hook) { (void)hook; }
};

// fp32 / fp64 on the host; throws std::invalid_argument for other types.
std::unique_ptr<AttentionEngine> make_cpu_attention_engine(DType dtype);
// bf16 / fp32 on the CUDA stream `stream` (a cudaStream_t). Throws std::invalid_argument when
// the build has no CUDA, or cudnn is asked for and is not available (the message says why).
// automatic: cuDNN for bf16 when this build has it and cuDNN starts here, else the suite's
// kernel; cudnn: cuDNN (bf16 only) or the error; suite: the suite's kernel.
std::unique_ptr<AttentionEngine> make_cuda_attention_engine(void* stream, DType dtype,
                                                            AttnKernelChoice choice);

}  // namespace suite::kernels

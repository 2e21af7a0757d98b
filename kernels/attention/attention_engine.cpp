// Names and parsing shared by every attention engine, and the CPU engine.
#include "kernels/attention/attention_engine.hpp"

#include <stdexcept>
#include <type_traits>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/core/bf16.hpp"
#include "kernels/core/blas_cpu.hpp"

namespace suite::kernels {

std::string_view block_mask_name(BlockMask m) {
  switch (m) {
    case BlockMask::full:
      return "full";
    case BlockMask::causal_top_left:
      return "causal_top_left";
    case BlockMask::causal_bottom_right:
      return "causal_bottom_right";
    case BlockMask::positions:
      return "positions";
  }
  return "?";
}

std::int64_t structured_visible_pairs(BlockMask m, std::int64_t cq, std::int64_t ck) {
  if (cq <= 0 || ck <= 0) return 0;
  if (m == BlockMask::full) return cq * ck;
  if (m == BlockMask::positions)
    throw std::invalid_argument("structured_visible_pairs: a positions mask has no shape");
  // Query i sees min(ck, max(0, i + off + 1)) keys: off 0 (top-left), ck - cq (bottom-right).
  const std::int64_t off = m == BlockMask::causal_top_left ? 0 : ck - cq;
  return clamped_prefix_sum(off + cq, ck) - clamped_prefix_sum(off, ck);
}

std::optional<AttnKernelChoice> parse_attn_kernel(std::string_view s) {
  if (s == "auto") return AttnKernelChoice::automatic;
  if (s == "suite") return AttnKernelChoice::suite;
  if (s == "cudnn") return AttnKernelChoice::cudnn;
  return std::nullopt;
}

std::string_view attn_kernel_choice_name(AttnKernelChoice c) {
  switch (c) {
    case AttnKernelChoice::automatic:
      return "auto";
    case AttnKernelChoice::suite:
      return "suite";
    case AttnKernelChoice::cudnn:
      return "cudnn";
  }
  return "?";
}

namespace {

// dst[i] += src[i] with dst of type D (bf16 rounds each sum, as a bf16 partial sum would).
template <class T>
void accumulate_into(void* dst, DType dst_type, const T* src, std::int64_t n) {
  switch (dst_type) {
    case DType::fp32: {
      auto* d = static_cast<float*>(dst);
      for (std::int64_t i = 0; i < n; ++i)
        d[i] = static_cast<float>(d[i] + src[i]);
      return;
    }
    case DType::fp64: {
      auto* d = static_cast<double*>(dst);
      for (std::int64_t i = 0; i < n; ++i)
        d[i] += static_cast<double>(src[i]);
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<bf16*>(dst);
      for (std::int64_t i = 0; i < n; ++i)
        d[i] = to_bf16(static_cast<float>(to_float(d[i]) + src[i]));
      return;
    }
  }
}

// The CPU backend: the tiled online-softmax kernel reads positions, so every mask works.
template <class T>
class CpuAttentionEngine final : public AttentionEngine {
 public:
  std::string name() const override { return "cpu-tiled"; }
  // Its inner products are the BLAS's GEMMs: name the library, as kernel_bench does.
  std::string library_version() const override { return cpu::blas_library_version(); }
  std::size_t lse_elem_size() const override { return sizeof(T); }
  void forward(const AttentionParams& p, BlockMask, const void* q, const void* k, const void* v,
               const std::int64_t* q_pos, const std::int64_t* k_pos, void* o, void* lse) override {
    cpu::attention_forward<T>(p, static_cast<const T*>(q), static_cast<const T*>(k),
                              static_cast<const T*>(v), q_pos, k_pos, static_cast<T*>(o),
                              static_cast<T*>(lse), hook_);
  }
  void merge(std::int64_t cq, int heads, int head_dim, const void* o_a, std::int64_t ld_a,
             const void* lse_a, const void* o_b, std::int64_t ld_b, const void* lse_b, void* o,
             std::int64_t ld_o, void* lse) override {
    cpu::lse_merge<T>(cq, heads, head_dim, static_cast<const T*>(o_a), ld_a,
                      static_cast<const T*>(lse_a), static_cast<const T*>(o_b), ld_b,
                      static_cast<const T*>(lse_b), static_cast<T*>(o), ld_o, static_cast<T*>(lse));
  }
  DType grad_type() const override { return std::is_same_v<T, float> ? DType::fp32 : DType::fp64; }
  void backward_delta(std::int64_t cq, int heads, int head_dim, const void* o, const void* d_o,
                      std::int64_t ld_o, void* delta) override {
    cpu::attention_backward_delta<T>(cq, heads, head_dim, static_cast<const T*>(o),
                                     static_cast<const T*>(d_o), ld_o, static_cast<T*>(delta));
  }
  void backward(const AttentionParams& p, BlockMask, const void* q, const void* k, const void* v,
                const void*, const void* d_o, const void* lse, const void* delta,
                const std::int64_t* q_pos, const std::int64_t* k_pos, void* dq, void* dk,
                void* dv) override {
    cpu::attention_backward<T>(
        p, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<const T*>(d_o), static_cast<const T*>(lse), static_cast<const T*>(delta), q_pos,
        k_pos, static_cast<T*>(dq), static_cast<T*>(dk), static_cast<T*>(dv), hook_);
  }
  void accumulate(void* dst, DType dst_type, const void* src, std::int64_t n) override {
    accumulate_into(dst, dst_type, static_cast<const T*>(src), n);
  }
  void set_progress_hook(std::function<void()> hook) override { hook_ = std::move(hook); }

 private:
  std::function<void()> hook_;
};

}  // namespace

std::unique_ptr<AttentionEngine> make_cpu_attention_engine(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return std::make_unique<CpuAttentionEngine<float>>();
    case DType::fp64:
      return std::make_unique<CpuAttentionEngine<double>>();
    case DType::bf16:
      break;
  }
  throw std::invalid_argument("CPU attention: dtype " + std::string(dtype_name(dtype)) +
                              " unsupported (fp32, fp64)");
}

#if !defined(SUITE_HAVE_CUDA)
std::unique_ptr<AttentionEngine> make_cuda_attention_engine(void*, DType, AttnKernelChoice) {
  throw std::invalid_argument("CUDA attention: this build has no CUDA");
}
#endif

}  // namespace suite::kernels

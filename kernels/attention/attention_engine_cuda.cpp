// CUDA attention engines: the suite's flash kernel (reads positions, so every mask works) and,
// when the build has cuDNN, cuDNN's SDPA with the suite's kernel as its fallback.
#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/attention/attention_cuda.hpp"
#include "kernels/attention/attention_engine.hpp"
#if defined(SUITE_HAVE_CUDNN)
#include "kernels/attention/attention_cudnn.hpp"
#endif

namespace suite::kernels {
namespace {

class SuiteFlashEngine final : public AttentionEngine {
 public:
  SuiteFlashEngine(cudaStream_t stream, DType dtype) : stream_(stream), dtype_(dtype) {}
  std::string name() const override { return "suite-flash"; }
  std::string library_version() const override { return "suite"; }
  std::size_t lse_elem_size() const override { return sizeof(float); }
  void forward(const AttentionParams& p, BlockMask, const void* q, const void* k, const void* v,
               const std::int64_t* q_pos, const std::int64_t* k_pos, void* o, void* lse) override {
    cuda::attention_forward(stream_, dtype_, p, q, k, v, q_pos, k_pos, o, static_cast<float*>(lse));
  }
  void merge(std::int64_t cq, int heads, int head_dim, const void* o_a, std::int64_t ld_a,
             const void* lse_a, const void* o_b, std::int64_t ld_b, const void* lse_b, void* o,
             std::int64_t ld_o, void* lse) override {
    cuda::lse_merge(stream_, dtype_, cq, heads, head_dim, o_a, ld_a,
                    static_cast<const float*>(lse_a), o_b, ld_b, static_cast<const float*>(lse_b),
                    o, ld_o, static_cast<float*>(lse));
  }
  DType grad_type() const override { return DType::fp32; }
  void backward_delta(std::int64_t cq, int heads, int head_dim, const void* o, const void* d_o,
                      std::int64_t ld_o, void* delta) override {
    cuda::attention_backward_delta(stream_, dtype_, cq, heads, head_dim, o, d_o, ld_o,
                                   static_cast<float*>(delta));
  }
  void backward(const AttentionParams& p, BlockMask, const void* q, const void* k, const void* v,
                const void*, const void* d_o, const void* lse, const void* delta,
                const std::int64_t* q_pos, const std::int64_t* k_pos, void* dq, void* dk,
                void* dv) override {
    cuda::attention_backward(stream_, dtype_, p, q, k, v, d_o, static_cast<const float*>(lse),
                             static_cast<const float*>(delta), q_pos, k_pos,
                             static_cast<float*>(dq), static_cast<float*>(dk),
                             static_cast<float*>(dv));
  }
  void accumulate(void* dst, DType dst_type, const void* src, std::int64_t n) override {
    cuda::accumulate(stream_, dst, dst_type, static_cast<const float*>(src), n);
  }

 private:
  cudaStream_t stream_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<AttentionEngine> make_cuda_attention_engine(void* stream, DType dtype,
                                                            AttnKernelChoice choice) {
  if (dtype != DType::bf16 && dtype != DType::fp32)
    throw std::invalid_argument("CUDA attention: dtype " + std::string(dtype_name(dtype)) +
                                " unsupported (bf16, fp32)");
  const auto s = static_cast<cudaStream_t>(stream);
  auto suite = std::make_unique<SuiteFlashEngine>(s, dtype);
  if (choice == AttnKernelChoice::suite) return suite;
#if defined(SUITE_HAVE_CUDNN)
  if (choice == AttnKernelChoice::cudnn && dtype != DType::bf16)
    throw std::invalid_argument("--attn-kernel cudnn: cuDNN attention runs bf16, not " +
                                std::string(dtype_name(dtype)));
  if (dtype == DType::bf16) {
    try {
      return cuda::make_cudnn_attention_engine(s, dtype, std::move(suite));
    } catch (const std::runtime_error& e) {
      if (choice == AttnKernelChoice::cudnn)
        throw std::invalid_argument(std::string("--attn-kernel cudnn: cuDNN cannot start: ") +
                                    e.what());
      return std::make_unique<SuiteFlashEngine>(s, dtype);  // auto: the suite's kernel
    }
  }
  return suite;
#else
  if (choice == AttnKernelChoice::cudnn)
    throw std::invalid_argument(
        "--attn-kernel cudnn: this build has no cuDNN attention "
        "(configure with cuDNN and the cudnn frontend headers)");
  return suite;
#endif
}

}  // namespace suite::kernels

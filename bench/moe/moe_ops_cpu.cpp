#include <cstring>
#include <vector>

#include "bench/moe/moe_ops.hpp"
#include "common/harness/errors.hpp"
#include "kernels/gemm/gemm_cpu.hpp"
#include "kernels/moe/moe_cpu.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"

namespace suite::moe {
namespace {

namespace km = kernels::moe;
namespace k = kernels::cpu;

template <class T>
class CpuMoeOps final : public MoeOps {
 public:
  void gemm_ex(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t kk, const void* a,
               const void* b, double beta, void* c) override {
    k::gemm<T>(ta, tb, m, n, kk, T(1), in(a), ta ? m : kk, in(b), tb ? kk : n, static_cast<T>(beta),
               out(c), n);
  }
  void router(std::int64_t tokens, int experts, int kk, const void* logits, const float* logit_bias,
              const float* select_bias, std::int32_t* chosen, float* gates, float* prob_sum,
              km::GroupLimit limit) override {
    std::vector<double> sums(static_cast<std::size_t>(experts), 0.0);
    km::cpu::router_topk<T>(tokens, experts, kk, in(logits), logit_bias, select_bias, chosen, gates,
                            sums.data(), limit);
    for (int e = 0; e < experts; ++e)
      prob_sum[e] += static_cast<float>(sums[static_cast<std::size_t>(e)]);
  }
  void gather_rows(std::int64_t rows, std::int64_t cols, const std::int64_t* src, const void* x,
                   void* y) override {
    km::cpu::gather_rows<T>(rows, cols, src, in(x), out(y));
  }
  void combine(std::int64_t tokens, int kk, std::int64_t cols, const std::int64_t* slot_pos,
               const float* gates, const void* back, void* y) override {
    km::cpu::combine<T>(tokens, kk, cols, slot_pos, gates, in(back), out(y));
  }
  void gelu(std::int64_t n, const void* x, void* y) override {
    k::gelu_forward<T>(n, in(x), out(y));
  }
  void silu_mul(std::int64_t rows, std::int64_t cols, const void* x, void* y) override {
    k::silu_mul_forward<T>(rows, cols, in(x), out(y));
  }
  void combine_backward(std::int64_t tokens, int kk, std::int64_t cols,
                        const std::int64_t* slot_pos, const float* gates, const void* grad_out,
                        const void* back, void* grad_back, float* gate_grad) override {
    km::cpu::combine_backward<T>(tokens, kk, cols, slot_pos, gates, in(grad_out), in(back),
                                 out(grad_back), gate_grad);
  }
  void router_backward(std::int64_t tokens, int experts, int kk, const void* logits,
                       const float* logit_bias, const std::int32_t* chosen, const float* gate_grad,
                       const float* prob_grad, void* dlogits) override {
    km::cpu::router_backward<T>(tokens, experts, kk, in(logits), logit_bias, chosen, gate_grad,
                                prob_grad, out(dlogits));
  }
  void gelu_backward(std::int64_t n, const void* x, const void* dy, void* dx) override {
    k::gelu_backward<T>(n, in(x), in(dy), out(dx));
  }
  void silu_mul_backward(std::int64_t rows, std::int64_t cols, const void* x, const void* dy,
                         void* dx) override {
    km::cpu::swiglu_backward<T>(rows, cols, in(x), in(dy), out(dx));
  }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }

 private:
  static const T* in(const void* p) { return static_cast<const T*>(p); }
  static T* out(void* p) { return static_cast<T*>(p); }
};

}  // namespace

std::unique_ptr<MoeOps> make_cpu_moe_ops(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return std::make_unique<CpuMoeOps<float>>();
    case DType::fp64:
      return std::make_unique<CpuMoeOps<double>>();
    default:
      throw UsageError("the CPU MoE layer runs in fp32 or fp64, not " +
                       std::string(dtype_name(dtype)));
  }
}

#if !defined(SUITE_HAVE_CUDA)
std::unique_ptr<MoeOps> make_cuda_moe_ops(Device&, DType) {
  throw UsageError("this build has no CUDA: the MoE layer runs on the CPU backend only");
}
#endif

}  // namespace suite::moe

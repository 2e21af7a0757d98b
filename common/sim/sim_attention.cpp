// Modeled compute's attention engine (common/sim/sim.hpp): the schedule calls it exactly as it
// calls the CPU engine; it skips the kernels and injects their FLOPs.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/sim/sim.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/attention/attention_index.hpp"

namespace suite::sim {
namespace {

using kernels::AttentionParams;
using kernels::BlockMask;

// Visible (query, key) pairs of one block: the caller's count where it gave one, from the
// mask's shape in O(1) (full, causal top-left or bottom-right), else from the positions as the
// kernels read them: key j is visible to query i iff k_pos[j] lies in query i's visible window
// (its document, up to itself when causal), in O((cq + ck) log ck).
double visible_pairs(const AttentionParams& p, BlockMask mask, const std::int64_t* q_pos,
                     const std::int64_t* k_pos) {
  if (p.known_visible_pairs >= 0) return static_cast<double>(p.known_visible_pairs);
  if (mask != BlockMask::positions) {
    const BlockMask shape = p.causal ? mask : BlockMask::full;
    return static_cast<double>(kernels::structured_visible_pairs(shape, p.cq, p.ck));
  }
  if (q_pos == nullptr || k_pos == nullptr)
    throw std::logic_error("modeled attention: a positions mask without positions");
  std::vector<std::int64_t> keys(k_pos, k_pos + p.ck);
  if (!std::is_sorted(keys.begin(), keys.end())) std::sort(keys.begin(), keys.end());
  double n = 0;
  for (std::int64_t i = 0; i < p.cq; ++i) {
    const kernels::KeyWindow w = kernels::visible_window(p.causal, q_pos[i]);
    n += static_cast<double>(std::upper_bound(keys.begin(), keys.end(), w.hi) -
                             std::lower_bound(keys.begin(), keys.end(), w.lo));
  }
  return n;
}

class ModeledAttentionEngine final : public kernels::AttentionEngine {
 public:
  explicit ModeledAttentionEngine(DType dtype) : dtype_(dtype) {}
  std::string name() const override { return "modeled"; }
  std::string library_version() const override {
    return "none: FLOPs injected at --sim-flops " + std::to_string(modeled_flops());
  }
  std::size_t lse_elem_size() const override { return dtype_size(dtype_); }
  // 4 d a FLOPs per visible pair (QK^T and PV), as the ring's and Ulysses' counts say.
  void forward(const AttentionParams& p, BlockMask mask, const void*, const void*, const void*,
               const std::int64_t* q_pos, const std::int64_t* k_pos, void*, void*) override {
    compute(4.0 * p.head_dim * p.heads * visible_pairs(p, mask, q_pos, k_pos));
  }
  void merge(std::int64_t, int, int, const void*, std::int64_t, const void*, const void*,
             std::int64_t, const void*, void*, std::int64_t, void*) override {}
  DType grad_type() const override { return dtype_; }
  void backward_delta(std::int64_t, int, int, const void*, const void*, std::int64_t,
                      void*) override {}
  // 10 d a FLOPs per visible pair (the backward's five matrix products).
  void backward(const AttentionParams& p, BlockMask mask, const void*, const void*, const void*,
                const void*, const void*, const void*, const void*, const std::int64_t* q_pos,
                const std::int64_t* k_pos, void*, void*, void*) override {
    compute(10.0 * p.head_dim * p.heads * visible_pairs(p, mask, q_pos, k_pos));
  }
  void accumulate(void*, DType, const void*, std::int64_t) override {}
  // No polling: SMPI moves a transfer in simulated time by itself, during an injected burst as
  // during any other, so a poll changes no simulated time (measured: identical step times at 256
  // ranks) but costs the simulator a search of its pending requests (41 s against 104 s).
  void set_progress_hook(std::function<void()>) override {}

 private:
  void compute(double flops) { inject_flops(flops); }
  DType dtype_;
};

}  // namespace

std::unique_ptr<kernels::AttentionEngine> make_modeled_attention_engine(DType dtype) {
  return std::make_unique<ModeledAttentionEngine>(dtype);
}

}  // namespace suite::sim

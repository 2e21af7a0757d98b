// The CPU merge of two partial attention results over disjoint key sets (the ring's merge of
// each round into the running result): weights from the two log-sum-exps, then each row's
// heads weighted and summed by a vectorised row operation.
#include <vector>

#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/lse_merge.hpp"
#include "kernels/core/cpu_clones.hpp"

namespace suite::kernels::cpu {
namespace {

// For each of `runs` runs of `len` values (a row's heads): out = w_a a + w_b b, a term whose
// weight is 0 counting 0 whatever its value (an empty partial's output may hold anything). out
// may be a. This file builds with -fno-trapping-math, so the selects vectorise, and with
// -ffp-contract=off, so the merge stays exactly commutative (no a*b + c fused on one side only).
template <class T>
SUITE_CPU_CLONES void weighted_sum_runs(T* out, const T* a, const T* w_a, const T* b, const T* w_b,
                                        int runs, int len) {
  for (int r = 0; r < runs; ++r) {
    const T wa = w_a[r], wb = w_b[r];
    const std::int64_t at = static_cast<std::int64_t>(r) * len;
    for (int c = 0; c < len; ++c)
      out[at + c] = weighted(wa, a[at + c]) + weighted(wb, b[at + c]);
  }
}

}  // namespace

template <class T>
void lse_merge(std::int64_t cq, int heads, int head_dim, const T* o_a, std::int64_t ld_a,
               const T* lse_a, const T* o_b, std::int64_t ld_b, const T* lse_b, T* o,
               std::int64_t ld_o, T* lse) {
  // Row by row: every head's weights, then the row's heads in one call (a row's heads are
  // contiguous, so the call vectorises over heads x head_dim values).
  std::vector<T> w_a(static_cast<std::size_t>(heads)), w_b(w_a.size());
  for (std::int64_t i = 0; i < cq; ++i) {
    for (int h = 0; h < heads; ++h) {
      const std::int64_t li = h * cq + i;
      const MergeWeights<T> w = merge_weights(lse_a[li], lse_b[li]);
      w_a[static_cast<std::size_t>(h)] = w.w_a;
      w_b[static_cast<std::size_t>(h)] = w.w_b;
      lse[li] = w.lse;
    }
    weighted_sum_runs(o + i * ld_o, o_a + i * ld_a, w_a.data(), o_b + i * ld_b, w_b.data(), heads,
                      head_dim);
  }
}

template void lse_merge<float>(std::int64_t, int, int, const float*, std::int64_t, const float*,
                               const float*, std::int64_t, const float*, float*, std::int64_t,
                               float*);
template void lse_merge<double>(std::int64_t, int, int, const double*, std::int64_t, const double*,
                                const double*, std::int64_t, const double*, double*, std::int64_t,
                                double*);

}  // namespace suite::kernels::cpu

// The CPU merge of two partial attention results over disjoint key sets (the ring's merge of
// each round into the running result): per row and head, weights from the two log-sum-exps,
// then the head's values weighted and summed in a vectorised loop.
#include "kernels/attention/attention_cpu.hpp"
#include "kernels/attention/lse_merge.hpp"
#include "kernels/core/cpu_clones.hpp"

namespace suite::kernels::cpu {
namespace {

// One row of the merge: for each head, the weights from the two log-sum-exps, then out =
// w_a a + w_b b over its head_dim values, a term whose weight is 0 counting 0 whatever its
// value (an empty partial's output may hold anything). out may be a, lse may be lse_a (the
// running result merged in place). This file builds with -fno-trapping-math, so the selects
// vectorise, and with -ffp-contract=off, so the merge stays exactly commutative (no a*b + c
// fused on one side only).
template <class T>
SUITE_CPU_CLONES void merge_row(T* out, const T* a, const T* b, T* lse, const T* lse_a,
                                const T* lse_b, std::int64_t lse_stride, int heads, int head_dim) {
  for (int h = 0; h < heads; ++h) {
    const std::int64_t l = h * lse_stride, at = static_cast<std::int64_t>(h) * head_dim;
    const MergeWeights<T> w = merge_weights(lse_a[l], lse_b[l]);
    lse[l] = w.lse;
    for (int c = 0; c < head_dim; ++c)
      out[at + c] = weighted(w.w_a, a[at + c]) + weighted(w.w_b, b[at + c]);
  }
}

}  // namespace

template <class T>
void lse_merge(std::int64_t cq, int heads, int head_dim, const T* o_a, std::int64_t ld_a,
               const T* lse_a, const T* o_b, std::int64_t ld_b, const T* lse_b, T* o,
               std::int64_t ld_o, T* lse) {
  // Row by row (lse is [heads, cq]): a row's heads are contiguous in o.
  for (std::int64_t i = 0; i < cq; ++i)
    merge_row(o + i * ld_o, o_a + i * ld_a, o_b + i * ld_b, lse + i, lse_a + i, lse_b + i, cq,
              heads, head_dim);
}

template void lse_merge<float>(std::int64_t, int, int, const float*, std::int64_t, const float*,
                               const float*, std::int64_t, const float*, float*, std::int64_t,
                               float*);
template void lse_merge<double>(std::int64_t, int, int, const double*, std::int64_t, const double*,
                                const double*, std::int64_t, const double*, double*, std::int64_t,
                                double*);

}  // namespace suite::kernels::cpu

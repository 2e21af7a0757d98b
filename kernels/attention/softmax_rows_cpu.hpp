// The element-wise row work of the CPU attention kernels, between their BLAS GEMMs: masking,
// row maxima, exponentials and sums, the softmax backward. Compiled for AVX-512, AVX2 and the
// baseline and picked at load time (GCC target_clones), so one binary runs anywhere at the
// speed of the machine it lands on. float uses a vectorisable exp (Cody-Waite reduction and a
// degree-6 polynomial, about 1 ulp); double uses std::exp.
#pragma once

#include <cstdint>

namespace suite::kernels::cpu {

// x[j] = -inf where key j is hidden from its query: k_pos[j] outside [lo, hi]
// (visible_window of the query: its document, up to itself when causal).
template <class T>
void mask_row(T* x, const std::int64_t* k_pos, std::int64_t n, std::int64_t lo, std::int64_t hi);

// n rounded up to whole 64-byte vectors. Scores laid out with rows this long, the columns past
// n set to -inf, run online_softmax_rows over the padded length: its loops then end on whole
// vectors, without the scalar tail that made a 15-key row cost twice a 16-key one (the pad
// adds exp(-inf) = 0 to the sums and nothing to the maxima).
template <class T>
constexpr std::int64_t padded_row_length(std::int64_t n) {
  constexpr std::int64_t lanes = 64 / sizeof(T);
  return (n + lanes - 1) / lanes * lanes;
}

// One online-softmax step for the rows of a score block s (rows x n, row stride n), each with
// its running max m[i], sum l[i] and output accumulator acc[i * d, (i + 1) * d): m[i] = max(m[i],
// the row's max); where m[i] grew from a finite value, l[i] and the accumulator row are scaled
// by exp(old - new); s[i][j] = exp(s[i][j] - m[i]) (0 where -inf); l[i] += the row's new sum.
// A row with nothing visible yet (m[i] stays -inf) becomes zeros and keeps m[i] and l[i].
template <class T>
void online_softmax_rows(T* s, std::int64_t rows, std::int64_t n, T* m, T* l, T* acc,
                         std::int64_t d);

// x[j] = exp(x[j] - shift) (0 where x[j] = -inf).
template <class T>
void exp_shift(T* x, std::int64_t n, T shift);

// dp[j] = p[j] * (dp[j] - delta): the softmax backward dS = P (dP - D) of one row.
template <class T>
void softmax_grad_row(T* dp, const T* p, std::int64_t n, T delta);

// Exposed for tests: the float exponential the kernels use.
float exp_approx(float x);

}  // namespace suite::kernels::cpu

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

// max_j x[j] (-inf for an empty or fully masked row).
template <class T>
T row_max(const T* x, std::int64_t n);

// x[j] = exp(x[j] - shift) (0 where x[j] = -inf); returns the sum of the new x.
template <class T>
T exp_shift_sum(T* x, std::int64_t n, T shift);

// x[j] = exp(x[j] - shift) (0 where x[j] = -inf).
template <class T>
void exp_shift(T* x, std::int64_t n, T shift);

// dp[j] = p[j] * (dp[j] - delta): the softmax backward dS = P (dP - D) of one row.
template <class T>
void softmax_grad_row(T* dp, const T* p, std::int64_t n, T delta);

// x[j] *= a.
template <class T>
void scale_row(T* x, std::int64_t n, T a);

// Exposed for tests: the float exponential the kernels use.
float exp_approx(float x);

}  // namespace suite::kernels::cpu

#include "kernels/attention/softmax_rows_cpu.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/core/cpu_clones.hpp"

namespace suite::kernels::cpu {
namespace {

// Helpers are inlined into each clone, so they are compiled for its instruction set too.
#define SUITE_ROW_INLINE inline __attribute__((always_inline))

// e^x for float without a call: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial
// (Cephes' expf coefficients), 2^n put into the exponent bits. Branch-free, so loops over it
// vectorise (given -fno-trapping-math: see kernels/CMakeLists.txt). Below -87 (and for -inf)
// it returns 0; the kernels never pass x > 0 by much.
SUITE_ROW_INLINE float exp_f(float x) {
  constexpr float lo = -87.0f, hi = 88.0f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  // Round x log2(e) to the nearest integer by adding and removing 1.5 * 2^23.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;  // ln 2 split in two for an exact first product
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  const float y = p * std::bit_cast<float>(bits);
  return x < lo ? 0.0f : y;
}

SUITE_ROW_INLINE float exp_t(float x) {
  return exp_f(x);
}
SUITE_ROW_INLINE double exp_t(double x) {
  return std::exp(x);
}

// Sums and maxima over 32 bytes of lanes at a time (GCC vector extensions): the compiler may
// not reorder a float reduction by itself, and its `a > b ? a : b` max would otherwise stay
// scalar. 32 bytes, not 64: on AVX2 GCC 12 lowered the 64-byte max to scalar code through the
// stack, and the row max took 11% of a packed-documents forward. The AVX2 and AVX-512 clones get
// ymm code; the baseline (SSE2) clone's max stays scalar, as before. Four accumulators, not
// one: a single chain waits on each add's or max's latency (4 cycles for 8 lanes), which held
// the row max and the row sum to half a cycle per element.
template <class T>
struct Lanes {
  static constexpr int n = 32 / sizeof(T);
  static constexpr int chains = 4;
  typedef T vec __attribute__((vector_size(32)));
};

// Out parameter, not a return value: returning a vector type from a function compiled for
// the baseline draws GCC's ABI warning (-Wpsabi) even where it is inlined.
template <class T>
SUITE_ROW_INLINE void load_lanes(typename Lanes<T>::vec& v, const T* x) {
  std::memcpy(&v, x, sizeof v);
}

// Folds x[0, n) into `chains` vector accumulators starting at `init` with `op` (a = op(a, b),
// in place: a vector return value draws the ABI warning too), then their lanes and the tail
// into one value.
template <class T, class Op>
SUITE_ROW_INLINE T lane_reduce(const T* x, std::int64_t n, T init, Op op) {
  using V = Lanes<T>;
  const typename V::vec zero = {};
  typename V::vec acc[V::chains];
  for (auto& a : acc)
    a = zero + init;  // every lane init (0 + -inf is -inf)
  std::int64_t j = 0;
  typename V::vec v;
  for (; j + V::chains * V::n <= n; j += V::chains * V::n)
    for (int c = 0; c < V::chains; ++c) {
      load_lanes<T>(v, x + j + c * V::n);
      op(acc[c], v);
    }
  for (; j + V::n <= n; j += V::n) {
    load_lanes<T>(v, x + j);
    op(acc[0], v);
  }
  for (int c = 1; c < V::chains; ++c)
    op(acc[0], acc[c]);
  // The lanes in a tree, log2(lanes) steps deep: one after the other they were a chain of 8
  // dependent operations (about 30 cycles) per row and reduction, most of a short row's cost.
  T lanes[V::n];
  std::memcpy(lanes, &acc[0], sizeof lanes);
  for (int w = V::n / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l)
      op(lanes[l], lanes[l + w]);
  T r = lanes[0];
  for (; j < n; ++j)
    op(r, x[j]);
  return r;
}

struct AddOp {
  template <class U>
  SUITE_ROW_INLINE void operator()(U& a, const U& b) const {
    a += b;
  }
};
struct MaxOp {
  template <class U>
  SUITE_ROW_INLINE void operator()(U& a, const U& b) const {
    a = a > b ? a : b;
  }
};

template <class T>
SUITE_ROW_INLINE T lane_sum(const T* x, std::int64_t n) {
  return lane_reduce(x, n, T(0), AddOp{});
}

template <class T>
SUITE_ROW_INLINE T lane_max(const T* x, std::int64_t n) {
  return lane_reduce(x, n, -std::numeric_limits<T>::infinity(), MaxOp{});
}

// The online-softmax step of online_softmax_rows, inlined into each clone: one call per
// GEMM's rows, not three per row, so the exp's constants are set up once per call and a
// causal diagonal's short rows do not pay a call and a setup each.
template <class T>
SUITE_ROW_INLINE void online_softmax(T* __restrict s, std::int64_t rows, std::int64_t n,
                                     T* __restrict m, T* __restrict l, T* __restrict acc,
                                     std::int64_t d) {
  constexpr T neg_inf = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = 0; i < rows; ++i) {
    T* __restrict row = s + i * n;
    const T row_m = lane_max(row, n);
    const T m_new = m[i] > row_m ? m[i] : row_m;
    if (m_new == neg_inf) {  // nothing visible to this query yet: a row of zeros
      for (std::int64_t j = 0; j < n; ++j)
        row[j] = T(0);
      continue;
    }
    if (m[i] != neg_inf && m_new != m[i]) {  // rescale what was accumulated
      const T corr = std::exp(m[i] - m_new);
      l[i] *= corr;
      for (std::int64_t c = 0; c < d; ++c)
        acc[i * d + c] *= corr;
    }
    for (std::int64_t j = 0; j < n; ++j)
      row[j] = exp_t(row[j] - m_new);
    l[i] += lane_sum(row, n);
    m[i] = m_new;
  }
}

#define SUITE_ROW_OPS(T)                                                                          \
  SUITE_CPU_CLONES void mask_row_##T(T* __restrict x, const std::int64_t* __restrict k_pos,       \
                                     std::int64_t n, std::int64_t lo, std::int64_t hi) {          \
    for (std::int64_t j = 0; j < n; ++j)                                                          \
      x[j] = k_pos[j] >= lo && k_pos[j] <= hi ? x[j] : -std::numeric_limits<T>::infinity();       \
  }                                                                                               \
  SUITE_CPU_CLONES void exp_shift_##T(T* __restrict x, std::int64_t n, T shift) {                 \
    for (std::int64_t j = 0; j < n; ++j)                                                          \
      x[j] = exp_t(x[j] - shift);                                                                 \
  }                                                                                               \
  SUITE_CPU_CLONES void online_softmax_rows_##T(T* __restrict s, std::int64_t rows,               \
                                                std::int64_t n, T* __restrict m, T* __restrict l, \
                                                T* __restrict acc, std::int64_t d) {              \
    online_softmax(s, rows, n, m, l, acc, d);                                                     \
  }                                                                                               \
  SUITE_CPU_CLONES void softmax_grad_row_##T(T* __restrict dp, const T* __restrict p,             \
                                             std::int64_t n, T delta) {                           \
    for (std::int64_t j = 0; j < n; ++j)                                                          \
      dp[j] = p[j] * (dp[j] - delta);                                                             \
  }
SUITE_ROW_OPS(float)
SUITE_ROW_OPS(double)
#undef SUITE_ROW_OPS

}  // namespace

#define SUITE_ROW_API(T)                                                                       \
  template <>                                                                                  \
  void mask_row<T>(T * x, const std::int64_t* k_pos, std::int64_t n, std::int64_t lo,          \
                   std::int64_t hi) {                                                          \
    mask_row_##T(x, k_pos, n, lo, hi);                                                         \
  }                                                                                            \
  template <>                                                                                  \
  void online_softmax_rows<T>(T * s, std::int64_t rows, std::int64_t n, T * m, T * l, T * acc, \
                              std::int64_t d) {                                                \
    online_softmax_rows_##T(s, rows, n, m, l, acc, d);                                         \
  }                                                                                            \
  template <>                                                                                  \
  void exp_shift<T>(T * x, std::int64_t n, T shift) {                                          \
    exp_shift_##T(x, n, shift);                                                                \
  }                                                                                            \
  template <>                                                                                  \
  void softmax_grad_row<T>(T * dp, const T* p, std::int64_t n, T delta) {                      \
    softmax_grad_row_##T(dp, p, n, delta);                                                     \
  }
SUITE_ROW_API(float)
SUITE_ROW_API(double)
#undef SUITE_ROW_API

float exp_approx(float x) {
  return exp_f(x);
}

}  // namespace suite::kernels::cpu

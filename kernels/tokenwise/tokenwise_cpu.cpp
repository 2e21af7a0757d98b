#include "kernels/tokenwise/tokenwise_cpu.hpp"

#include <cmath>
#include <stdexcept>

#include "kernels/core/counter_rng.hpp"
#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/layernorm_row_stats_cpu.hpp"
#include "kernels/tokenwise/silu.hpp"

namespace suite::kernels::cpu {

template <class T>
void layernorm_forward(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma,
                       const T* beta, std::type_identity_t<T> eps, T* y) {
  if (cols <= 0) throw std::invalid_argument("layernorm_forward: cols must be positive");
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const auto [mean, rstd] = layernorm_row_stats(xr, cols, eps);
    for (std::int64_t c = 0; c < cols; ++c) {
      yr[c] = static_cast<T>((xr[c] - mean) * rstd * gamma[c] + beta[c]);
    }
  }
}

template <class T>
void gelu_forward(std::int64_t n, const T* x, T* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = gelu_tanh(x[i]);
}

template <class T>
void silu_mul_forward(std::int64_t rows, std::int64_t cols, const T* x, T* y) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = silu(x[swiglu_gate_index(r, c, cols)]) * x[swiglu_up_index(r, c, cols)];
}

template <class T>
void residual_add(std::int64_t n, const T* x, const T* residual, T* y) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = x[i] + residual[i];
}

template <class T>
void dropout_forward(std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                     std::int64_t row_offset, const T* x, T* y, std::uint8_t* mask) {
  const std::uint32_t threshold = dropout_threshold(p);
  const T scale = T(1) / (T(1) - static_cast<T>(p));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t i = r * cols + c;
      const bool keep = hidden_dropout_keep(seed, row_offset + r, c, threshold);
      mask[i] = keep ? 1 : 0;
      y[i] = keep ? x[i] * scale : T(0);
    }
  }
}

#define SUITE_INSTANTIATE_TOKENWISE(T)                                                             \
  template void layernorm_forward<T>(std::int64_t, std::int64_t, const T*, const T*, const T*, T,  \
                                     T*);                                                          \
  template void gelu_forward<T>(std::int64_t, const T*, T*);                                       \
  template void residual_add<T>(std::int64_t, const T*, const T*, T*);                             \
  template void silu_mul_forward<T>(std::int64_t, std::int64_t, const T*, T*);                     \
  template void dropout_forward<T>(std::int64_t, std::int64_t, float, std::uint64_t, std::int64_t, \
                                   const T*, T*, std::uint8_t*);
SUITE_INSTANTIATE_TOKENWISE(float)
SUITE_INSTANTIATE_TOKENWISE(double)
#undef SUITE_INSTANTIATE_TOKENWISE

}  // namespace suite::kernels::cpu

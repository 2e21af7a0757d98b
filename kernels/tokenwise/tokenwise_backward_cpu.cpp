// Backward of the token-wise ops on the CPU, beside their forwards in tokenwise_cpu.cpp; the
// element-wise arithmetic is tokenwise_grad.hpp's, shared with the CUDA kernels.
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/tokenwise/gelu.hpp"
#include "kernels/tokenwise/layernorm_row_stats_cpu.hpp"
#include "kernels/tokenwise/tokenwise_cpu.hpp"
#include "kernels/tokenwise/tokenwise_grad.hpp"

namespace suite::kernels::cpu {

template <class T>
void layernorm_backward(std::int64_t rows, std::int64_t cols, const T* x, const T* gamma,
                        const T* dy, std::type_identity_t<T> eps, T* dx, T* dgamma, T* dbeta) {
  if (cols <= 0) throw std::invalid_argument("layernorm_backward: cols must be positive");
  std::vector<double> dg(static_cast<std::size_t>(cols), 0.0), db(dg);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const T* dyr = dy + r * cols;
    T* dxr = dx + r * cols;
    const auto [mean, rstd] = layernorm_row_stats(xr, cols, eps);
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      const double xhat = (xr[c] - mean) * rstd;
      sum_g += g;
      sum_gx += g * xhat;
      dg[static_cast<std::size_t>(c)] += static_cast<double>(dyr[c]) * xhat;
      db[static_cast<std::size_t>(c)] += dyr[c];
    }
    const double mean_g = sum_g / static_cast<double>(cols);
    const double mean_gx = sum_gx / static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (xr[c] - mean) * rstd;
      dxr[c] = static_cast<T>(layernorm_input_grad(static_cast<double>(dyr[c]) * gamma[c], xhat,
                                                   mean_g, mean_gx, rstd));
    }
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    dgamma[c] = static_cast<T>(dg[static_cast<std::size_t>(c)]);
    dbeta[c] = static_cast<T>(db[static_cast<std::size_t>(c)]);
  }
}

template <class T>
void gelu_backward(std::int64_t n, const T* x, const T* dy, T* dx) {
  for (std::int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * gelu_tanh_grad(x[i]);
}

template <class T>
void dropout_backward(std::int64_t n, float p, const std::uint8_t* mask, const T* dy, T* dx) {
  const T scale = T(1) / (T(1) - static_cast<T>(p));  // the forward's factor, in T
  for (std::int64_t i = 0; i < n; ++i)
    dx[i] = dropout_grad(dy[i], mask[i], scale);
}

template <class T>
void softmax_dropout_backward(std::int64_t rows, std::int64_t cols, float p, const T* probs,
                              const std::uint8_t* mask, T* g) {
  const T scale = T(1) / (T(1) - static_cast<T>(p));
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* pr = probs + r * cols;
    const std::uint8_t* mr = mask + r * cols;
    T* gr = g + r * cols;
    double dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      gr[c] = dropout_grad(gr[c], mr[c], scale);
      dot += static_cast<double>(pr[c]) * gr[c];
    }
    for (std::int64_t c = 0; c < cols; ++c)
      gr[c] = static_cast<T>(softmax_grad<double>(pr[c], gr[c], dot));
  }
}

#define SUITE_INSTANTIATE_TOKENWISE_BWD(T)                                                         \
  template void layernorm_backward<T>(std::int64_t, std::int64_t, const T*, const T*, const T*, T, \
                                      T*, T*, T*);                                                 \
  template void gelu_backward<T>(std::int64_t, const T*, const T*, T*);                            \
  template void dropout_backward<T>(std::int64_t, float, const std::uint8_t*, const T*, T*);       \
  template void softmax_dropout_backward<T>(std::int64_t, std::int64_t, float, const T*,           \
                                            const std::uint8_t*, T*);
SUITE_INSTANTIATE_TOKENWISE_BWD(float)
SUITE_INSTANTIATE_TOKENWISE_BWD(double)
#undef SUITE_INSTANTIATE_TOKENWISE_BWD

}  // namespace suite::kernels::cpu

#include "bench/pipeline/stage_layers.hpp"

#include <algorithm>
#include <cmath>

#include "common/sim/sim.hpp"
#include "kernels/core/blas_cpu.hpp"

namespace suite::pipeline {

namespace {

// C = op(A) op(B) (+ C when accumulate), row-major. Modeled compute (SMPI, --sim-flops) charges
// its 2 m n k FLOPs instead: F, B and W then cost 2 GEMMs a layer each.
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const double* A,
          const double* B, double* C, bool accumulate = false) {
  if (sim::modeled()) {
    sim::inject_flops(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                      static_cast<double>(k));
    return;
  }
  kernels::cpu::blas_gemm<double>(ta, tb, m, n, k, 1.0, A, ta ? m : k, B, tb ? k : n,
                                  accumulate ? 1.0 : 0.0, C, n);
}

// Small, distinct values from a seed and an index (no RNG state to share between ranks).
double smooth(std::int64_t seed, std::int64_t i) {
  return std::sin(0.7 * static_cast<double>(seed) + 0.37 * static_cast<double>(i) + 0.1);
}

}  // namespace

Rows pipeline_input(const LayerShape& shape, int microbatch) {
  Rows x(static_cast<std::size_t>(shape.rows * shape.hidden));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = smooth(1000 + microbatch, i);
  return x;
}

StageLayers::StageLayers(const LayerShape& shape, int first_layer, int count, int first_input)
    : shape_(shape), first_(first_layer), first_input_(first_input) {
  const std::int64_t size = shape.hidden * shape.ffn;
  // Scaled so that activations neither vanish nor grow over the layers.
  const double scale1 = 1.0 / std::sqrt(static_cast<double>(shape.hidden));
  const double scale2 = 0.5 / std::sqrt(static_cast<double>(shape.ffn));
  for (int l = 0; l < count; ++l) {
    Rows w1(size), w2(size);
    for (std::int64_t i = 0; i < size; ++i) {
      w1[i] = scale1 * smooth(2 * (first_layer + l), i);
      w2[i] = scale2 * smooth(2 * (first_layer + l) + 1, i);
    }
    w1_.push_back(std::move(w1));
    w2_.push_back(std::move(w2));
    dw1_.emplace_back(size, 0.0);
    dw2_.emplace_back(size, 0.0);
  }
}

Rows StageLayers::forward(int mb, const Rows& input) {
  if (input.empty()) return forward(mb, Rows(hop_values()));  // a placeholder's (stage.hpp)
  const std::int64_t n = shape_.rows, h = shape_.hidden, f = shape_.ffn;
  Saved& s = saved_[mb];
  Rows x = input;
  for (int l = 0; l < count(); ++l) {
    Rows a(static_cast<std::size_t>(n * f));
    gemm(false, false, n, f, h, x.data(), w1_[l].data(), a.data());
    for (double& v : a)
      v = std::tanh(v);
    Rows y = x;
    gemm(false, false, n, h, f, a.data(), w2_[l].data(), y.data(), true);
    s.x.push_back(std::move(x));
    s.a.push_back(std::move(a));
    x = std::move(y);
  }
  return x;
}

Rows StageLayers::input_grad(int mb, const Rows& grad_output) {
  if (grad_output.empty()) return input_grad(mb, Rows(hop_values()));
  const std::int64_t n = shape_.rows, h = shape_.hidden, f = shape_.ffn;
  Saved& s = saved_.at(mb);
  s.dy.assign(count(), {});
  s.g.assign(count(), {});
  Rows dy = grad_output;
  for (int l = count() - 1; l >= 0; --l) {
    Rows g(static_cast<std::size_t>(n * f));
    gemm(false, true, n, f, h, dy.data(), w2_[l].data(), g.data());
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] *= 1.0 - s.a[l][i] * s.a[l][i];
    Rows dx = dy;  // the residual
    gemm(false, true, n, h, f, g.data(), w1_[l].data(), dx.data(), true);
    s.dy[l] = std::move(dy);
    s.g[l] = std::move(g);
    dy = std::move(dx);
  }
  return dy;
}

void StageLayers::weight_grad(int mb, bool accumulate) {
  const std::int64_t n = shape_.rows, h = shape_.hidden, f = shape_.ffn;
  const Saved& s = saved_.at(mb);
  for (int l = 0; accumulate && l < count(); ++l) {
    gemm(true, false, h, f, n, s.x[l].data(), s.g[l].data(), dw1_[l].data(), true);
    gemm(true, false, f, h, n, s.a[l].data(), s.dy[l].data(), dw2_[l].data(), true);
  }
  saved_.erase(mb);
}

void StageLayers::begin_step() {
  for (auto* grads : {&dw1_, &dw2_})
    for (Rows& g : *grads)
      std::fill(g.begin(), g.end(), 0.0);
}

std::vector<ParamTensor> StageLayers::params() {
  const auto size = static_cast<std::size_t>(shape_.hidden * shape_.ffn);
  std::vector<ParamTensor> out;
  for (int l = 0; l < count(); ++l) {
    out.push_back({w1_[l].data(), dw1_[l].data(), size});
    out.push_back({w2_[l].data(), dw2_[l].data(), size});
  }
  return out;
}

std::int64_t StageLayers::bytes_per_microbatch() const {
  // Per layer the forward keeps x [n, h] and tanh [n, f]; the backward adds dy and g.
  return static_cast<std::int64_t>(count()) * shape_.rows * (shape_.hidden + shape_.ffn) *
         static_cast<std::int64_t>(sizeof(double));
}

}  // namespace suite::pipeline

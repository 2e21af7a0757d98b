// Maps the suite's storage DType onto the element types CUDA kernels are instantiated for
// (bf16 and fp32 storage, fp32 arithmetic), with loads/stores that convert on the fly.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/core/bf16.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::kernels {

SUITE_HD inline float load_f32(const float* p, std::int64_t i) {
  return p[i];
}
SUITE_HD inline float load_f32(const bf16* p, std::int64_t i) {
  return to_float(p[i]);
}
SUITE_HD inline void store_f32(float* p, std::int64_t i, float v) {
  p[i] = v;
}
SUITE_HD inline void store_f32(bf16* p, std::int64_t i, float v) {
  p[i] = to_bf16(v);
}

// p[i] += v, rounding the sum once to the storage type (a bf16 partial sum rounds every add).
SUITE_HD inline void add_f32(float* p, std::int64_t i, float v) {
  p[i] += v;
}
SUITE_HD inline void add_f32(bf16* p, std::int64_t i, float v) {
  p[i] = to_bf16(to_float(p[i]) + v);
}

// Calls f(float{}) or f(bf16{}) for the storage type; fp64 has no CUDA path.
template <class F>
void dispatch_storage(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::fp32:
      f(float{});
      return;
    case DType::bf16:
      f(bf16{});
      return;
    default:
      throw std::invalid_argument(std::string(what) + ": CUDA kernels take bf16 or fp32, not " +
                                  std::string(dtype_name(t)));
  }
}

}  // namespace suite::kernels

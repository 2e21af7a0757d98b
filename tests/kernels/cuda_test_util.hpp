// CUDA test helpers: skip without a device, device buffers that round-trip through the
// storage type, and the precision-derived tolerance.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <vector>

#include "kernels/core/bf16.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_buffer.hpp"
#include "kernels/core/dtype.hpp"

namespace suite {
// Readable test names and failure messages for DType parameters (found by ADL).
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}
}  // namespace suite

namespace suite::kernels::test {

inline bool cuda_device_visible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Use as the first statement of every CUDA test.
#define SUITE_REQUIRE_CUDA_DEVICE()                                      \
  do {                                                                   \
    if (!::suite::kernels::test::cuda_device_visible()) {                \
      (void)cudaGetLastError(); /* clear the sticky "no device" error */ \
      GTEST_SKIP() << "no CUDA device visible";                          \
    }                                                                    \
  } while (0)

// Unit roundoff of the storage type: outputs are rounded to it once.
inline double storage_eps(DType t) {
  return t == DType::bf16 ? 1.0 / 256 : 1.0 / (1 << 22);
}

using cuda::DeviceBuffer;

// Uploads `values` in storage type t; rounds `values` in place to what the device holds,
// so the CPU reference computes on exactly the device's inputs.
inline DeviceBuffer upload(DType t, std::vector<float>& values) {
  DeviceBuffer buf(values.size() * dtype_size(t));
  if (t == DType::bf16) {
    std::vector<bf16> h(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      h[i] = to_bf16(values[i]);
      values[i] = to_float(h[i]);
    }
    SUITE_CUDA_CHECK(cudaMemcpy(buf.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  } else {
    SUITE_CUDA_CHECK(
        cudaMemcpy(buf.get(), values.data(), values.size() * 4, cudaMemcpyHostToDevice));
  }
  return buf;
}

inline std::vector<float> download(DType t, const DeviceBuffer& buf, std::size_t n) {
  std::vector<float> out(n);
  if (t == DType::bf16) {
    std::vector<bf16> h(n);
    SUITE_CUDA_CHECK(cudaMemcpy(h.data(), buf.get(), n * 2, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i)
      out[i] = to_float(h[i]);
  } else {
    SUITE_CUDA_CHECK(cudaMemcpy(out.data(), buf.get(), n * 4, cudaMemcpyDeviceToHost));
  }
  return out;
}

template <class T>
DeviceBuffer upload_raw(const std::vector<T>& v) {
  DeviceBuffer buf(v.size() * sizeof(T));
  if (!v.empty()) {
    SUITE_CUDA_CHECK(cudaMemcpy(buf.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return buf;
}

template <class T>
std::vector<T> download_raw(const DeviceBuffer& buf, std::size_t n) {
  std::vector<T> v(n);
  if (n > 0)
    SUITE_CUDA_CHECK(cudaMemcpy(v.data(), buf.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace suite::kernels::test

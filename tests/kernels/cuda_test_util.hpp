// CUDA test helpers: skip where no GPU is expected, fail where one is but CUDA cannot use it
// (tests/support/gpu_gate.hpp), device buffers that round-trip through the storage type, and
// the precision-derived tolerance.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/core/bf16.hpp"
#include "kernels/core/cuda_check.hpp"
#include "kernels/core/device_buffer.hpp"
#include "kernels/core/dtype.hpp"
#include "tests/support/gpu_gate.hpp"

namespace suite {
// Readable test names and failure messages for DType parameters (found by ADL).
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}
}  // namespace suite

namespace suite::kernels::test {

// "" when the CUDA runtime sees a device, else what it said.
inline std::string cuda_setup_error() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later queries start clean
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  }
  return n > 0 ? "" : "cudaGetDeviceCount: no device";
}

inline bool cuda_device_visible() {
  return cuda_setup_error().empty();
}

// Use as the first statement of every CUDA test: without a usable device it skips where no
// GPU is expected and fails where one is (SUITE_GPU_SETUP_FAILED).
#define SUITE_REQUIRE_CUDA_DEVICE()                                                 \
  do {                                                                              \
    const std::string suite_cuda_err_ = ::suite::kernels::test::cuda_setup_error(); \
    if (!suite_cuda_err_.empty()) SUITE_GPU_SETUP_FAILED(suite_cuda_err_, false);   \
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

// A float result widened for comparison with a double reference.
inline std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// Every element within eps * |ref| + abs_tol.
inline void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double eps,
                         double abs_tol, const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], eps * std::abs(ref[i]) + abs_tol) << what << " at " << i;
}

}  // namespace suite::kernels::test

#include "common/device/typed_host.hpp"

#include <cstring>

#include "kernels/core/bf16.hpp"

namespace suite {

std::vector<std::byte> encode(const std::vector<double>& values, DType t) {
  std::vector<std::byte> out(values.size() * dtype_size(t));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::byte* dst = out.data() + i * dtype_size(t);
    switch (t) {
      case DType::fp32: {
        float f = static_cast<float>(values[i]);
        std::memcpy(dst, &f, sizeof f);
        break;
      }
      case DType::fp64:
        std::memcpy(dst, &values[i], sizeof(double));
        break;
      case DType::bf16: {
        bf16 h = to_bf16(static_cast<float>(values[i]));
        std::memcpy(dst, &h, sizeof h);
        break;
      }
    }
  }
  return out;
}

std::vector<double> decode(const void* data, std::size_t count, DType t) {
  std::vector<double> out(count);
  auto* src = static_cast<const std::byte*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    const std::byte* p = src + i * dtype_size(t);
    switch (t) {
      case DType::fp32: {
        float f;
        std::memcpy(&f, p, sizeof f);
        out[i] = f;
        break;
      }
      case DType::fp64:
        std::memcpy(&out[i], p, sizeof(double));
        break;
      case DType::bf16: {
        bf16 h;
        std::memcpy(&h, p, sizeof h);
        out[i] = to_float(h);
        break;
      }
    }
  }
  return out;
}

}  // namespace suite

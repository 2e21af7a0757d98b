// Element types the suite moves and computes with, shared by kernels, transports and results.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace suite {

enum class DType { fp32, fp64, bf16 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::fp32:
      return 4;
    case DType::fp64:
      return 8;
    case DType::bf16:
      return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::fp32:
      return "fp32";
    case DType::fp64:
      return "fp64";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

// One value for each element type (a tolerance, say), read for the type at hand.
struct PerDType {
  double fp32, fp64, bf16;

  constexpr double at(DType t) const {
    switch (t) {
      case DType::fp32:
        return fp32;
      case DType::fp64:
        return fp64;
      case DType::bf16:
        return bf16;
    }
    return 0;
  }
};

inline std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "fp32" || s == "float32") return DType::fp32;
  if (s == "fp64" || s == "float64") return DType::fp64;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  return std::nullopt;
}

}  // namespace suite

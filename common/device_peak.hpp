// Peak dense FLOP/s of the devices the suite knows, so every measured rate can be printed
// beside what the hardware could do at best (and flagged when it claims more). Values are
// the vendors' dense (non-sparse) figures; 0 means unknown.
#pragma once

#include <string_view>

#include "kernels/core/dtype.hpp"

namespace suite {

inline double gpu_peak_flops(std::string_view device_name, DType t) {
  auto has = [&](std::string_view s) { return device_name.find(s) != std::string_view::npos; };
  const bool bf16 = t == DType::bf16;
  const bool fp32 = t == DType::fp32;
  if (has("H100 PCIe")) return bf16 ? 756e12 : fp32 ? 51e12 : 0.0;
  if (has("H100") && has("NVL")) return 0.0;  // different clocks and power: not tabulated
  if (has("H100") || has("H200")) return bf16 ? 989e12 : fp32 ? 67e12 : 0.0;  // SXM
  if (has("A100")) return bf16 ? 312e12 : fp32 ? 19.5e12 : 0.0;
  return 0.0;
}

// A measured rate above a known peak is impossible: a timing or FLOP-counting bug.
inline bool impossible_rate(double achieved, double peak) {
  return peak > 0 && achieved > peak;
}

}  // namespace suite

// Peak dense FLOP/s of the devices the suite knows, so every measured rate can be printed
// beside what the hardware could do at best (and flagged when it claims more). Values are
// the vendors' dense (non-sparse) figures; 0 means unknown.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

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

// Where the peak is known (> 0): `peak_flops`, and `<rate>_impossible` = 1 for each measured
// FLOP rate (name, value) above it. Attrs: a results record's Attributes (name-value pairs).
template <class Attrs>
void add_peak_attrs(Attrs& a, double peak,
                    std::initializer_list<std::pair<const char*, double>> rates) {
  if (peak <= 0) return;
  a.emplace_back("peak_flops", peak);
  for (const auto& [name, value] : rates)
    a.emplace_back(std::string(name) + "_impossible",
                   std::int64_t{impossible_rate(value, peak) ? 1 : 0});
}

}  // namespace suite

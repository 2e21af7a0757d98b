// bfloat16 storage type usable on host and device. Conversions round to nearest even, so the
// CPU reference produces exactly the bits that CUDA's __float2bfloat16 produces.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SUITE_HD __host__ __device__
#else
#define SUITE_HD
#endif

namespace suite {

struct bf16 {
  std::uint16_t bits = 0;
};

SUITE_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SUITE_HD inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

SUITE_HD inline bf16 to_bf16(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};  // keep NaN a (quiet) NaN
  }
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>((u + rounding) >> 16)};
}

SUITE_HD inline float to_float(bf16 h) {
  return bits_float(static_cast<std::uint32_t>(h.bits) << 16);
}

}  // namespace suite

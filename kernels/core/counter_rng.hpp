// Counter-based random bits: a pure function of (seed, key...), identical on host and device.
// Dropout masks are drawn from it keyed by global indices, so any sharding of rows or heads
// draws exactly the bits the unsharded run draws, and CPU and CUDA agree bit for bit.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

// splitmix64 finaliser: a bijection on 64 bits with full avalanche.
SUITE_HD inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Chained mixing: each key passes through a full mix, so (a, b) and (b, a) differ.
SUITE_HD inline std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return mix64(mix64(mix64(seed) ^ a) ^ b);
}

SUITE_HD inline std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t a, std::uint64_t b,
                                           std::uint64_t c) {
  return mix64(counter_hash(seed, a, b) ^ c);
}

// Dropout decisions compare 24 random bits with an integer threshold, so host and device
// make the same decision without any floating-point comparison.
constexpr int kDropoutBits = 24;

// Threshold for drop probability p in [0, 1): an element is kept iff its 24 bits >= threshold.
inline std::uint32_t dropout_threshold(double p) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument("dropout probability must be in [0, 1)");
  return static_cast<std::uint32_t>(p * static_cast<double>(1u << kDropoutBits));
}

SUITE_HD inline bool dropout_keep(std::uint64_t hash, std::uint32_t threshold) {
  return static_cast<std::uint32_t>(hash >> (64 - kDropoutBits)) >= threshold;
}

// Hidden-state dropout: keyed by (seed, global row, feature).
SUITE_HD inline bool hidden_dropout_keep(std::uint64_t seed, std::int64_t row, std::int64_t col,
                                         std::uint32_t threshold) {
  return dropout_keep(
      counter_hash(seed, static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(col)),
      threshold);
}

// Attention-probability dropout: keyed by (seed, global head, query position, key position),
// with a tag so it never reuses the hidden-dropout stream for the same seed.
SUITE_HD inline bool attention_dropout_keep(std::uint64_t seed, std::int64_t head,
                                            std::int64_t q_pos, std::int64_t k_pos,
                                            std::uint32_t threshold) {
  const std::uint64_t tagged = seed ^ 0xa77e4710d5a7f00dull;
  return dropout_keep(
      counter_hash(mix64(tagged) ^ static_cast<std::uint64_t>(head),
                   static_cast<std::uint64_t>(q_pos), static_cast<std::uint64_t>(k_pos)),
      threshold);
}

}  // namespace suite::kernels

// Helpers shared by the kernel tests: seeded random data and the positions of one rank's block
// in the three sequence layouts of METHODS.md section 2 (bench/layouts).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "bench/layouts/ring_layout.hpp"

namespace suite::kernels::test {

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(dist(gen));
  return v;
}

using Layout = ring::Layout;
using ring::layout_name;

// Positions of the c tokens rank r of n holds in one of the sequence layouts (sequence length
// n * c). Unlike ring::rank_positions it takes an odd c for zig-zag too (the second chunk
// then holds one token more), so that odd block sizes can be tested under its mask.
inline std::vector<std::int64_t> block_positions(Layout l, int r, int n, std::int64_t c) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(c));
  for (std::int64_t i = 0; i < c; ++i) {
    switch (l) {
      case Layout::contiguous:
        pos[i] = r * c + i;
        break;
      case Layout::zigzag: {  // chunk r then chunk 2n-1-r, each c/2 tokens
        const std::int64_t half = c / 2;
        pos[i] = i < half ? r * half + i : (2 * n - 1 - r) * half + (i - half);
        break;
      }
      case Layout::striped:
        pos[i] = i * n + r;
        break;
      case Layout::doc_zigzag:
      case Layout::balanced:
        throw std::invalid_argument("block_positions: a sequence layout, not a document one");
    }
  }
  return pos;
}

inline std::vector<std::int64_t> iota_positions(std::int64_t n, std::int64_t first = 0) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    pos[i] = first + i;
  return pos;
}

template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

template <class A>
double max_abs(const A& a) {
  double m = 0;
  for (const auto& x : a)
    m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

}  // namespace suite::kernels::test

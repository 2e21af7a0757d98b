#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/a2a/head_pack.hpp"

namespace suite::kernels {

void validate_head_pack(const HeadPackShape& s, bool unpack) {
  auto fail = [](const std::string& why) { throw std::invalid_argument("head pack: " + why); };
  if (s.rows < 0 || s.heads < 1 || s.blocks < 1 || s.heads_per_block < 1 || s.head_dim < 1)
    fail("sizes must be positive");
  const bool even = s.heads == s.blocks * s.heads_per_block;
  const bool replicated = s.heads_per_block == 1 && s.blocks % s.heads == 0;
  if (!even && !replicated)
    fail(std::to_string(s.heads) + " heads do not split into " + std::to_string(s.blocks) +
         " blocks of " + std::to_string(s.heads_per_block));
  if (unpack && !even) fail("unpacking needs heads = blocks x heads_per_block");
}

namespace cpu {
namespace {

// Both layouts keep a head's d features together: move runs of head_dim elements, each
// located by its first element through the shared index helper.
template <class Index>
void move(const HeadPackShape& s, std::size_t e, const void* src, void* dst, std::int64_t n,
          Index source_of) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* from = static_cast<const unsigned char*>(src);
  const std::size_t run = static_cast<std::size_t>(s.head_dim) * e;
  for (std::int64_t i = 0; i < n; i += s.head_dim)
    std::memcpy(d + i * e, from + source_of(s, i) * e, run);
}

}  // namespace

void head_pack(const HeadPackShape& s, std::size_t e, const void* src, void* dst) {
  validate_head_pack(s, false);
  move(s, e, src, dst, s.packed_elems(), pack_source_index);
}

void head_unpack(const HeadPackShape& s, std::size_t e, const void* src, void* dst) {
  validate_head_pack(s, true);
  move(s, e, src, dst, s.unpacked_elems(), unpack_source_index);
}

namespace {

// Replicated K/V heads: each run of head_dim elements is the sum of its replicas' runs (a
// replica's run is contiguous too, located by its first element).
template <class T>
void unpack_sum(const HeadPackShape& s, const T* src, T* dst) {
  const int replicas = unpack_replicas(s);
  for (std::int64_t i = 0; i < s.unpacked_elems(); i += s.head_dim)
    for (int c = 0; c < s.head_dim; ++c) {
      double sum = 0;
      for (int r = 0; r < replicas; ++r) {
        const T x = src[unpack_sum_source_index(s, i, r) + c];
        if constexpr (std::is_same_v<T, bf16>)
          sum += to_float(x);
        else
          sum += x;
      }
      if constexpr (std::is_same_v<T, bf16>)
        dst[i + c] = to_bf16(static_cast<float>(sum));
      else
        dst[i + c] = static_cast<T>(sum);
    }
}

}  // namespace

void head_unpack_sum(const HeadPackShape& s, DType t, const void* src, void* dst) {
  validate_head_pack(s, false);
  if (unpack_replicas(s) == 1) return head_unpack(s, dtype_size(t), src, dst);  // nothing to sum
  switch (t) {
    case DType::fp32:
      return unpack_sum(s, static_cast<const float*>(src), static_cast<float*>(dst));
    case DType::fp64:
      return unpack_sum(s, static_cast<const double*>(src), static_cast<double*>(dst));
    case DType::bf16:
      return unpack_sum(s, static_cast<const bf16*>(src), static_cast<bf16*>(dst));
  }
}

}  // namespace cpu
}  // namespace suite::kernels

// How a (query tile, key tile) pair of a block is treated by the tensor-core kernel, decided
// from global positions only (so contiguous, zig-zag and striped layouts and packed documents
// all work): skipped (no visible pair), computed without a mask (every pair visible), or
// masked element by element. __host__ __device__: the CPU tests check the very decisions the GPU
// makes.
#pragma once

#include <cstdint>

#include "kernels/attention/attention_index.hpp"
#include "kernels/core/bf16.hpp"  // SUITE_HD

namespace suite::kernels {

enum class TileVisibility { none, partial, all };

// q_min / q_max: smallest and largest position among the tile's valid queries; k_min /
// k_max: the same among its valid keys; keys_complete: the key tile has no slot past ck
// (those slots must always be masked). A tile without valid queries or keys is `none`.
SUITE_HD inline TileVisibility classify_tile(bool causal, std::int64_t q_min, std::int64_t q_max,
                                             std::int64_t k_min, std::int64_t k_max, bool any_query,
                                             bool any_key, bool keys_complete) {
  if (!any_query || !any_key) return TileVisibility::none;
  if (causal && k_min > q_max) return TileVisibility::none;
  // Documents (tagged positions): no key document within the queries' range, nothing visible;
  // every pair visible only when all of both tiles lie in one document.
  if (document_of(k_max) < document_of(q_min) || document_of(k_min) > document_of(q_max))
    return TileVisibility::none;
  const bool one_document = document_of(q_min) == document_of(q_max) &&
                            document_of(k_min) == document_of(k_max) &&
                            document_of(q_min) == document_of(k_min);
  const bool every_pair = one_document && (!causal || k_max <= q_min);
  return every_pair && keys_complete ? TileVisibility::all : TileVisibility::partial;
}

// Shared-memory row stride (elements) of a tile of D-wide bf16 rows: 8 elements (16 bytes) of
// padding put the 8 rows an ldmatrix or a fragment load touches in distinct bank groups.
SUITE_HD constexpr int mma_smem_stride(int head_dim) {
  return head_dim + 8;
}

// Bytes of dynamic shared memory of the tensor-core kernel: a Q tile and two stages of K and V.
SUITE_HD constexpr int mma_smem_bytes(int head_dim, int rows_q, int rows_kv) {
  return 2 * mma_smem_stride(head_dim) * (rows_q + 4 * rows_kv);
}

// mma.sync m16n8k16 fragment coordinates (PTX ISA, "Matrix fragments for mma.m16n8k16"),
// lane = 0..31, g = lane / 4, t = lane % 4. Register r of A (16x16, row-major) holds the pair
// (row, col), (row, col + 1); of B (16x8, k-major) the pair (k, n), (k + 1, n); accumulator
// element e of C (16x8) lies at (row, col).
struct FragCoord {
  int row, col;
};
SUITE_HD inline FragCoord mma_a_coord(int lane, int r) {
  return {lane / 4 + (r & 1) * 8, (lane % 4) * 2 + (r >> 1) * 8};
}
SUITE_HD inline FragCoord mma_b_coord(int lane, int r) {  // {k, n}
  return {(lane % 4) * 2 + r * 8, lane / 4};
}
SUITE_HD inline FragCoord mma_c_coord(int lane, int e) {
  return {lane / 4 + (e >> 1) * 8, (lane % 4) * 2 + (e & 1)};
}

}  // namespace suite::kernels

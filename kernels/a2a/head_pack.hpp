// The block transposes around Ulysses' all-to-alls (METHODS.md section 3). A rank's tokens
// [rows = tokens x batch][heads][d] are packed into one block per destination rank j holding
// head group j ([u][rows][heads_per_block][d]); after attention the received blocks are
// unpacked back to [rows][u x heads_per_block][d]. With K/V replication (more ranks than K/V
// heads) block j carries the one K/V head that rank j's query heads read.
// Index arithmetic is __host__ __device__, so the CPU tests check the very code the GPU runs.
#pragma once

#include <cstdint>

#include "kernels/core/bf16.hpp"  // SUITE_HD
#include "kernels/core/dtype.hpp"

namespace suite::kernels {

struct HeadPackShape {
  std::int64_t rows = 0;    // tokens x batch
  int heads = 0;            // heads in the unpacked tensor (H)
  int blocks = 1;           // u: destination ranks
  int heads_per_block = 0;  // H / u, or 1 with replication (then u must be a multiple of H)
  int head_dim = 0;
  std::int64_t packed_elems() const {
    return static_cast<std::int64_t>(blocks) * rows * heads_per_block * head_dim;
  }
  std::int64_t unpacked_elems() const { return rows * heads * head_dim; }
};

// Head of the unpacked tensor that packed block j, slot hh carries: j * H_blk + hh when the
// heads split evenly (H = u H_blk), else (replication) the head rank j's queries read.
SUITE_HD inline int packed_source_head(const HeadPackShape& s, int j, int hh) {
  return static_cast<int>((static_cast<std::int64_t>(j) * s.heads_per_block + hh) * s.heads /
                          (static_cast<std::int64_t>(s.blocks) * s.heads_per_block));
}

// Element of the unpacked tensor that packed element `i` comes from.
SUITE_HD inline std::int64_t pack_source_index(const HeadPackShape& s, std::int64_t i) {
  const std::int64_t c = i % s.head_dim;
  const std::int64_t hh = (i / s.head_dim) % s.heads_per_block;
  const std::int64_t row =
      (i / (static_cast<std::int64_t>(s.head_dim) * s.heads_per_block)) % s.rows;
  const std::int64_t j = i / (static_cast<std::int64_t>(s.head_dim) * s.heads_per_block * s.rows);
  const int h = packed_source_head(s, static_cast<int>(j), static_cast<int>(hh));
  return (row * s.heads + h) * s.head_dim + c;
}

// Element of the packed blocks that unpacked element `i` comes from (no replication:
// heads = blocks * heads_per_block).
SUITE_HD inline std::int64_t unpack_source_index(const HeadPackShape& s, std::int64_t i) {
  const std::int64_t c = i % s.head_dim;
  const std::int64_t h = (i / s.head_dim) % s.heads;
  const std::int64_t row = i / (static_cast<std::int64_t>(s.head_dim) * s.heads);
  const std::int64_t j = h / s.heads_per_block, hh = h % s.heads_per_block;
  return ((j * s.rows + row) * s.heads_per_block + hh) * s.head_dim + c;
}

// The backward's unpack (head_unpack_sum): with replication each K/V head came from
// blocks / heads ranks, and its gradient is the sum of their blocks; otherwise one replica.
SUITE_HD inline int unpack_replicas(const HeadPackShape& s) {
  return s.heads == s.blocks * s.heads_per_block ? 1 : s.blocks / s.heads;
}

// Element of the packed blocks that replica r (0 .. unpack_replicas - 1) of unpacked element
// `i` comes from: the blocks of the ranks that read head h are h * replicas .. + replicas - 1.
SUITE_HD inline std::int64_t unpack_sum_source_index(const HeadPackShape& s, std::int64_t i,
                                                     int r) {
  const int replicas = unpack_replicas(s);
  if (replicas == 1) return unpack_source_index(s, i);
  const std::int64_t c = i % s.head_dim;
  const std::int64_t h = (i / s.head_dim) % s.heads;
  const std::int64_t row = i / (static_cast<std::int64_t>(s.head_dim) * s.heads);
  const std::int64_t j = h * replicas + r;  // heads_per_block = 1 under replication
  return (j * s.rows + row) * s.head_dim + c;
}

// Throws std::invalid_argument when the shape is not one Ulysses can use.
void validate_head_pack(const HeadPackShape& s, bool unpack);

namespace cpu {
// elem_size bytes per element (2, 4 or 8): the transposes move elements, whatever their type.
void head_pack(const HeadPackShape& s, std::size_t elem_size, const void* src, void* dst);
void head_unpack(const HeadPackShape& s, std::size_t elem_size, const void* src, void* dst);
// The transpose of head_pack for gradients: dst [rows][heads][d] = the sum over the replicas
// of each head (one replica without replication: head_unpack), typed (fp32, fp64, bf16;
// bf16 sums in float).
void head_unpack_sum(const HeadPackShape& s, DType t, const void* src, void* dst);
}  // namespace cpu

}  // namespace suite::kernels

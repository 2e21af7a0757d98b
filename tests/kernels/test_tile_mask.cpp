// The tensor-core attention kernel's host-testable pieces: tile classification from global
// positions and the mma.sync m16n8k16 fragment coordinates it indexes shared memory with.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "kernels/attention/tile_mask.hpp"

namespace suite::kernels {
namespace {

TEST(TileMask, ClassifyFromPositions) {
  using V = TileVisibility;
  // Causal, contiguous: keys 0..63 against queries 64..127 (all visible), 0..63 (diagonal),
  // and keys 128..191 against queries 64..127 (none).
  EXPECT_EQ(classify_tile(true, 64, 127, 0, 63, true, true, true), V::all);
  EXPECT_EQ(classify_tile(true, 0, 63, 0, 63, true, true, true), V::partial);
  EXPECT_EQ(classify_tile(true, 64, 127, 128, 191, true, true, true), V::none);
  // Striped strictly-lower diagonal: query positions 4i+1, key positions 4j+2.
  EXPECT_EQ(classify_tile(true, 1, 253, 2, 254, true, true, true), V::partial);
  // Zig-zag: a query tile's two chunks straddle the key tile.
  EXPECT_EQ(classify_tile(true, 32, 479, 100, 163, true, true, true), V::partial);
  // Not causal: everything visible, unless the tile runs past ck.
  EXPECT_EQ(classify_tile(false, 0, 10, 500, 600, true, true, true), V::all);
  EXPECT_EQ(classify_tile(false, 0, 10, 500, 600, true, true, false), V::partial);
  EXPECT_EQ(classify_tile(true, 64, 127, 0, 10, true, true, false), V::partial);
  // No valid queries (a warp past cq) or keys: nothing to do.
  EXPECT_EQ(classify_tile(false, 0, 10, 0, 10, false, true, true), V::none);
  EXPECT_EQ(classify_tile(false, 0, 10, 0, 10, true, false, true), V::none);
}

TEST(TileMask, FragmentsCoverTheirTilesOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      const FragCoord x = mma_a_coord(lane, r);
      EXPECT_TRUE(a.insert({x.row, x.col}).second);
      EXPECT_TRUE(a.insert({x.row, x.col + 1}).second);
      const FragCoord y = mma_c_coord(lane, r);
      EXPECT_TRUE(c.insert({y.row, y.col}).second);
    }
    for (int r = 0; r < 2; ++r) {
      const FragCoord x = mma_b_coord(lane, r);
      EXPECT_TRUE(b.insert({x.row, x.col}).second);
      EXPECT_TRUE(b.insert({x.row + 1, x.col}).second);
    }
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
  for (const auto& [row, col] : a)
    EXPECT_TRUE(row >= 0 && row < 16 && col >= 0 && col < 16);
  for (const auto& [k, n] : b)
    EXPECT_TRUE(k >= 0 && k < 16 && n >= 0 && n < 8);
}

// The kernel feeds the accumulators of S blocks 2kk and 2kk+1 (keys 16kk..16kk+15) straight
// into the A fragment of P V: register r = pack(block 2kk + r/2, elements 2(r%2), 2(r%2)+1).
TEST(TileMask, AccumulatorIsTheNextAFragment) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r) {
      const int block = r >> 1, e = (r & 1) * 2;
      const FragCoord acc = mma_c_coord(lane, e), acc1 = mma_c_coord(lane, e + 1);
      const FragCoord a = mma_a_coord(lane, r);
      EXPECT_EQ(acc.row, a.row) << lane << "," << r;
      EXPECT_EQ(acc.col + 8 * block, a.col) << lane << "," << r;
      EXPECT_EQ(acc1.row, a.row);
      EXPECT_EQ(acc1.col, acc.col + 1);  // the pair packs adjacent keys
    }
  }
}

TEST(TileMask, SharedMemoryFitsAndAligns) {
  // 16-byte rows for cp.async / ldmatrix, and within sm_80's 163 KiB opt-in.
  EXPECT_EQ(mma_smem_stride(64) * 2 % 16, 0);
  EXPECT_EQ(mma_smem_stride(128) * 2 % 16, 0);
  EXPECT_LE(mma_smem_bytes(128, 64, 64), 163 * 1024);
  // Padding spreads the 8 rows one ldmatrix reads over distinct 16-byte bank groups.
  for (int d : {64, 128}) {
    std::set<int> groups;
    for (int row = 0; row < 8; ++row)
      groups.insert((row * mma_smem_stride(d) * 2 / 16) % 8);
    EXPECT_EQ(groups.size(), 8u) << d;
  }
}

}  // namespace
}  // namespace suite::kernels

// Ulysses' head pack / unpack against nested loops written from the layouts' definitions.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kernels/a2a/head_pack.hpp"

namespace suite::kernels {
namespace {

std::vector<std::int64_t> iota(std::int64_t n) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(HeadPack, BlockJHoldsHeadGroupJ) {
  const HeadPackShape s{3, 8, 4, 2, 5};  // rows, heads, blocks, heads per block, d
  auto src = iota(s.unpacked_elems());
  std::vector<std::int64_t> dst(static_cast<std::size_t>(s.packed_elems()), -1);
  cpu::head_pack(s, sizeof(std::int64_t), src.data(), dst.data());
  for (int j = 0; j < 4; ++j)
    for (int r = 0; r < 3; ++r)
      for (int hh = 0; hh < 2; ++hh)
        for (int c = 0; c < 5; ++c)
          ASSERT_EQ(dst[((j * 3 + r) * 2 + hh) * 5 + c], (r * 8 + j * 2 + hh) * 5 + c);
  std::vector<std::int64_t> back(src.size(), -1);
  cpu::head_unpack(s, sizeof(std::int64_t), dst.data(), back.data());
  EXPECT_EQ(back, src);
}

TEST(HeadPack, ReplicatedKvHeadsFollowTheQueryHeads) {
  // 2 K/V heads for 4 ranks (GQA beyond the limit): rank j reads K/V head j * 2 / 4.
  const HeadPackShape s{2, 2, 4, 1, 3};
  auto src = iota(s.unpacked_elems());
  std::vector<std::int64_t> dst(static_cast<std::size_t>(s.packed_elems()));
  cpu::head_pack(s, sizeof(std::int64_t), src.data(), dst.data());
  for (int j = 0; j < 4; ++j)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(dst[(j * 2 + r) * 3 + c], (r * 2 + j / 2) * 3 + c);
}

TEST(HeadPack, WorksOnTwoByteElements) {
  const HeadPackShape s{2, 4, 2, 2, 64};
  std::vector<std::uint16_t> src(static_cast<std::size_t>(s.unpacked_elems()));
  std::iota(src.begin(), src.end(), std::uint16_t{1});
  std::vector<std::uint16_t> packed(src.size()), back(src.size());
  cpu::head_pack(s, 2, src.data(), packed.data());
  cpu::head_unpack(s, 2, packed.data(), back.data());
  EXPECT_EQ(back, src);
  EXPECT_NE(packed, src);
}

// The backward's unpack is the adjoint of the pack: <pack(x), g> = <x, unpack_sum(g)> for any
// x and g, with replication (a K/V head read by two ranks gets both ranks' gradients) and
// without.
TEST(HeadPack, UnpackSumIsTheAdjointOfThePack) {
  for (const HeadPackShape s :
       {HeadPackShape{3, 2, 4, 1, 5}, HeadPackShape{3, 8, 4, 2, 5}, HeadPackShape{2, 1, 3, 1, 4}}) {
    std::vector<double> x(static_cast<std::size_t>(s.unpacked_elems())),
        g(static_cast<std::size_t>(s.packed_elems()));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<double>((i * 37) % 11) - 5;
    for (std::size_t i = 0; i < g.size(); ++i)
      g[i] = static_cast<double>((i * 53) % 13) - 6;
    std::vector<double> px(g.size()), ug(x.size());
    cpu::head_pack(s, sizeof(double), x.data(), px.data());
    cpu::head_unpack_sum(s, DType::fp64, g.data(), ug.data());
    const double lhs = std::inner_product(px.begin(), px.end(), g.begin(), 0.0);
    const double rhs = std::inner_product(x.begin(), x.end(), ug.begin(), 0.0);
    EXPECT_EQ(lhs, rhs) << s.heads << " heads, " << s.blocks << " blocks";
  }
  // Spelled out for 2 K/V heads on 4 ranks: head h sums blocks 2h and 2h + 1.
  const HeadPackShape s{1, 2, 4, 1, 1};
  const std::vector<float> g = {1, 2, 30, 40};
  std::vector<float> out(2);
  cpu::head_unpack_sum(s, DType::fp32, g.data(), out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 70}));
}

TEST(HeadPack, RejectsUnevenSplits) {
  std::vector<float> buf(64);
  EXPECT_THROW(cpu::head_pack({2, 6, 4, 1, 4}, 4, buf.data(), buf.data()), std::invalid_argument);
  EXPECT_THROW(cpu::head_unpack({2, 2, 4, 1, 4}, 4, buf.data(), buf.data()), std::invalid_argument);
}

}  // namespace
}  // namespace suite::kernels

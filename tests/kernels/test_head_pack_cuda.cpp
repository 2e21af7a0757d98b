// CUDA head pack / unpack against the CPU version, element for element.
#include <gtest/gtest.h>

#include <numeric>
#include <ostream>

#include "kernels/a2a/head_pack_cuda.hpp"
#include "tests/kernels/cuda_test_util.hpp"

namespace suite::kernels {

// Readable parameter names in test listings (found by ADL).
inline void PrintTo(const HeadPackShape& s, std::ostream* os) {
  *os << "rows" << s.rows << "_h" << s.heads << "_u" << s.blocks << "_hpb" << s.heads_per_block
      << "_d" << s.head_dim;
}

namespace {

using test::DeviceBuffer;

class HeadPackCuda : public ::testing::TestWithParam<HeadPackShape> {};

TEST_P(HeadPackCuda, MatchesCpu) {
  SUITE_REQUIRE_CUDA_DEVICE();
  const HeadPackShape s = GetParam();
  const bool even = s.heads == s.blocks * s.heads_per_block;
  std::vector<std::uint16_t> src(static_cast<std::size_t>(s.unpacked_elems()));
  std::iota(src.begin(), src.end(), std::uint16_t{3});
  std::vector<std::uint16_t> want(static_cast<std::size_t>(s.packed_elems()));
  cpu::head_pack(s, 2, src.data(), want.data());
  auto d_src = test::upload_raw(src);
  DeviceBuffer d_packed(want.size() * 2);
  cuda::head_pack(nullptr, s, 2, d_src.get(), d_packed.get());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(test::download_raw<std::uint16_t>(d_packed, want.size()), want);
  if (!even) return;
  DeviceBuffer d_back(src.size() * 2);
  cuda::head_unpack(nullptr, s, 2, d_packed.get(), d_back.get());
  SUITE_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(test::download_raw<std::uint16_t>(d_back, src.size()), src);
}

INSTANTIATE_TEST_SUITE_P(Shapes, HeadPackCuda,
                         ::testing::Values(HeadPackShape{5, 8, 4, 2, 64},
                                           HeadPackShape{7, 32, 8, 4, 128},
                                           HeadPackShape{3, 2, 4, 1, 64},
                                           HeadPackShape{1, 4, 1, 4, 64}));

}  // namespace
}  // namespace suite::kernels

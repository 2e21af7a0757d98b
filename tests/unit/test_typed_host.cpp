#include <gtest/gtest.h>

#include "common/device/typed_host.hpp"

TEST(TypedHost, RoundTripsEachType) {
  std::vector<double> v{0, 1, -2.5, 3, 255, 256};
  for (auto t : {suite::DType::fp32, suite::DType::fp64, suite::DType::bf16}) {
    auto bytes = suite::encode(v, t);
    ASSERT_EQ(bytes.size(), v.size() * suite::dtype_size(t));
    EXPECT_EQ(suite::decode(bytes.data(), v.size(), t), v) << suite::dtype_name(t);
  }
}

TEST(TypedHost, Bf16RoundsToNearestEven) {
  // 257 lies halfway between bf16 neighbours 256 and 258: ties go to the even mantissa (256).
  auto bytes = suite::encode({257, 259, 1.0 / 3}, suite::DType::bf16);
  auto back = suite::decode(bytes.data(), 3, suite::DType::bf16);
  EXPECT_EQ(back[0], 256);
  EXPECT_EQ(back[1], 260);
  EXPECT_NEAR(back[2], 1.0 / 3, 1.0 / 256);
}

// The peak table the kernel benchmark prints beside measured rates.
#include <gtest/gtest.h>

#include "common/device_peak.hpp"

namespace suite {
namespace {

TEST(DevicePeak, KnownAndUnknownDevices) {
  EXPECT_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", DType::bf16), 989e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H200", DType::fp32), 67e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA A100-SXM4-80GB", DType::bf16), 312e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA A100-SXM4-80GB", DType::fp32), 19.5e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H100 PCIe", DType::bf16), 756e12);
  EXPECT_EQ(gpu_peak_flops("NVIDIA GeForce RTX 4090", DType::bf16), 0.0);
  EXPECT_EQ(gpu_peak_flops("NVIDIA H100 80GB HBM3", DType::fp64), 0.0);
  EXPECT_TRUE(impossible_rate(2e15, 989e12));
  EXPECT_FALSE(impossible_rate(2e15, 0.0));  // unknown peak: never flagged
  EXPECT_FALSE(impossible_rate(5e14, 989e12));
}

}  // namespace
}  // namespace suite

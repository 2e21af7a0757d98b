// The peak table the benchmarks print beside measured rates, and the attributes they write.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/device/device_peak.hpp"

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

TEST(DevicePeak, AttributesBesideTheRates) {
  std::vector<std::pair<std::string, double>> attrs;
  add_peak_attrs(attrs, 0.0, {{"measured_F_flops", 1e18}});
  EXPECT_TRUE(attrs.empty());  // unknown peak (the CPU): nothing to say
  add_peak_attrs(attrs, 989e12, {{"calib_flops_per_s", 5e14}, {"expert_flops_per_s", 2e15}});
  const std::vector<std::pair<std::string, double>> want = {{"peak_flops", 989e12},
                                                            {"calib_flops_per_s_impossible", 0},
                                                            {"expert_flops_per_s_impossible", 1}};
  EXPECT_EQ(attrs, want);
}

}  // namespace
}  // namespace suite

// The GPU driver's release as a results file records it, from the text of
// /proc/driver/nvidia/version as NVIDIA's proprietary and open kernel modules print it.
#include "common/results/run_info.hpp"

#include <gtest/gtest.h>

namespace suite {
namespace {

TEST(RunInfo, NvidiaDriverOfTheProprietaryModule) {
  EXPECT_EQ(nvidia_driver_from("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar"
                               "  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0\n"),
            "550.54.15");
}

TEST(RunInfo, NvidiaDriverOfTheOpenModule) {
  EXPECT_EQ(nvidia_driver_from("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  "
                               "560.35.03  Release Build  (dvs-builder@U16-I3-B03-4-3)  Fri Aug"
                               " 16 21:42:42 UTC 2024\nGCC version:  gcc version 11.4.0\n"),
            "560.35.03");
}

TEST(RunInfo, NvidiaDriverUnknownWithoutTheModule) {
  EXPECT_EQ(nvidia_driver_from(""), "unknown");
  EXPECT_EQ(nvidia_driver_from("GCC version:  gcc version 12.2.0\n"), "unknown");
}

}  // namespace
}  // namespace suite

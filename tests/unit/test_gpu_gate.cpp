// The skip-or-fail decision of GPU tests (tests/support/gpu_gate.hpp), on machines laid out in a
// scratch directory: what the NVIDIA driver shows (/dev/nvidia<N>, /proc/driver/nvidia/gpus)
// and the environment decide whether a GPU is expected; a set-up failure then fails the test
// where one is and skips, naming why, where none is.
#include "tests/support/gpu_gate.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace suite::gpu_gate {
namespace {

namespace fs = std::filesystem;

// A fake filesystem root holding the given files (empty), removed at the end of the test.
class FakeRoot {
 public:
  explicit FakeRoot(std::initializer_list<const char*> files)
      : root_(fs::temp_directory_path() /
              ("suite_gpu_gate_" + std::to_string(getpid()) + "_" + std::to_string(next_++))) {
    fs::create_directories(root_);
    for (const char* f : files) {
      fs::create_directories((root_ / f).parent_path());
      std::ofstream(root_ / f).put('\n');
    }
  }
  ~FakeRoot() { fs::remove_all(root_); }
  const fs::path& path() const { return root_; }

 private:
  static inline int next_ = 0;
  fs::path root_;
};

// What an NCCL communicator set-up failure looks like to the test (a thrown error).
const std::string kNcclFailure = "NCCL set-up: ncclCommInitRank failed: unhandled cuda error";

TEST(GpuGate, NcclSetUpFailureWithAGpuVisibleFails) {
  FakeRoot gpu({"dev/nvidiactl", "dev/nvidia0", "dev/nvidia-uvm"});
  const GpuExpectation e = expect_gpu(nullptr, nullptr, gpu.path());
  EXPECT_TRUE(e.expected);
  EXPECT_EQ(e.why, (gpu.path() / "dev/nvidia0").string() + " exists");
  const GpuSetupVerdict v = gpu_setup_failed(e, kNcclFailure);
  EXPECT_EQ(v.action, GpuSetup::fail);
  EXPECT_NE(v.message.find("a GPU is expected here"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find(kNcclFailure), std::string::npos) << v.message;
}

TEST(GpuGate, DriverListingAGpuCountsAsVisible) {
  FakeRoot gpu({"proc/driver/nvidia/gpus/0000:3b:00.0/information"});
  const GpuExpectation e = expect_gpu(nullptr, "0", gpu.path());
  EXPECT_TRUE(e.expected);
  EXPECT_EQ(gpu_setup_failed(e, "cudaGetDeviceCount: CUDA driver version is insufficient").action,
            GpuSetup::fail);
}

TEST(GpuGate, WithoutAGpuTheTestSkipsWithTheReason) {
  // A host with the driver's control nodes but no GPU node, and an empty one.
  for (auto files : {std::initializer_list<const char*>{"dev/nvidiactl", "dev/nvidia-uvm"},
                     std::initializer_list<const char*>{}}) {
    FakeRoot host(files);
    const GpuExpectation e = expect_gpu(nullptr, nullptr, host.path());
    EXPECT_FALSE(e.expected);
    const GpuSetupVerdict v = gpu_setup_failed(e, "cudaGetDeviceCount: no CUDA-capable device");
    EXPECT_EQ(v.action, GpuSetup::skip);
    EXPECT_EQ(v.message,
              "no GPU expected (no /dev/nvidia<N> device, no /proc/driver/nvidia/gpus entry): "
              "cudaGetDeviceCount: no CUDA-capable device");
  }
}

TEST(GpuGate, HiddenGpusAreNotExpected) {
  FakeRoot gpu({"dev/nvidia0"});
  for (const char* hidden : {"", "-1", "-1,0", "NoDevFiles"}) {
    const GpuExpectation e = expect_gpu(nullptr, hidden, gpu.path());
    EXPECT_FALSE(e.expected) << hidden;
    EXPECT_EQ(e.why, std::string("CUDA_VISIBLE_DEVICES=") + hidden + " hides every GPU");
    EXPECT_EQ(gpu_setup_failed(e, kNcclFailure).action, GpuSetup::skip) << hidden;
  }
  EXPECT_TRUE(expect_gpu(nullptr, "1,0", gpu.path()).expected);
}

TEST(GpuGate, SuiteExpectGpuOverridesTheMachine) {
  FakeRoot none({});
  const GpuExpectation forced = expect_gpu("1", "-1", none.path());
  EXPECT_TRUE(forced.expected && forced.forced);
  EXPECT_EQ(gpu_setup_failed(forced, kNcclFailure).action, GpuSetup::fail);
  // Forced, also what the build left out fails: the user asked for the GPU paths.
  const GpuSetupVerdict lacks = gpu_setup_failed(forced, "this build has no CUDA", true);
  EXPECT_EQ(lacks.action, GpuSetup::fail);
  EXPECT_NE(lacks.message.find("(SUITE_EXPECT_GPU=1)"), std::string::npos) << lacks.message;

  FakeRoot gpu({"dev/nvidia3"});
  const GpuExpectation off = expect_gpu("0", nullptr, gpu.path());
  EXPECT_FALSE(off.expected);
  EXPECT_EQ(gpu_setup_failed(off, kNcclFailure).message,
            "no GPU expected (SUITE_EXPECT_GPU=0): " + kNcclFailure);
}

TEST(GpuGate, WhatTheBuildLeftOutSkipsUnlessForced) {
  FakeRoot gpu({"dev/nvidia0"});
  const GpuExpectation e = expect_gpu(nullptr, nullptr, gpu.path());
  const GpuSetupVerdict v = gpu_setup_failed(e, "this build has no NCCL", true);
  EXPECT_EQ(v.action, GpuSetup::skip);
  EXPECT_EQ(v.message, "this build has no NCCL");
}

}  // namespace
}  // namespace suite::gpu_gate

// Whether a GPU test that cannot set up skips or fails. It skips, naming why, only where no
// GPU is expected; where one is (the machine has NVIDIA GPU device nodes or driver entries, or
// SUITE_EXPECT_GPU=1 says so) a set-up failure fails the test, so a broken driver, CUDA runtime
// or NCCL on a GPU machine cannot read as a pass. What a build leaves out (no CUDA, no NCCL)
// skips, unless SUITE_EXPECT_GPU=1 asks for the GPU paths to run.
//
//   SUITE_EXPECT_GPU=1   a GPU must be used here: every GPU set-up failure fails
//   SUITE_EXPECT_GPU=0   skip GPU tests on purpose, whatever the machine has
//   CUDA_VISIBLE_DEVICES empty, -1 (or any entry CUDA stops at first) or NoDevFiles: the GPUs
//                        are hidden on purpose, none is expected
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace suite::gpu_gate {

struct GpuExpectation {
  bool expected = false;  // a GPU is there, so a GPU test must run
  bool forced = false;    // SUITE_EXPECT_GPU=1: also when the build lacks the GPU path
  std::string why;        // what said so, for the message
};

// True when `dir` holds an entry whose name is `prefix` followed by digits only (nvidia0, not
// nvidiactl or nvidia-uvm, which exist on driver hosts without a GPU).
inline bool has_numbered_entry(const std::filesystem::path& dir, const std::string& prefix,
                               std::string* found) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    bool digits = true;
    for (std::size_t i = prefix.size(); i < name.size(); ++i)
      digits = digits && std::isdigit(static_cast<unsigned char>(name[i]));
    if (digits) {
      *found = (dir / name).string();
      return true;
    }
  }
  return false;
}

// Whether a GPU is expected, from SUITE_EXPECT_GPU (`expect_env`), CUDA_VISIBLE_DEVICES
// (`visible_env`; nullptr when unset) and the machine under `root`: /dev/nvidia<N> device
// nodes or /proc/driver/nvidia/gpus entries (what the driver shows whatever the CUDA runtime
// can do with it).
inline GpuExpectation expect_gpu(const char* expect_env, const char* visible_env,
                                 const std::filesystem::path& root) {
  const std::string expect = expect_env ? expect_env : "";
  if (expect == "1") return {true, true, "SUITE_EXPECT_GPU=1"};
  if (expect == "0") return {false, false, "SUITE_EXPECT_GPU=0"};
  if (visible_env) {
    const std::string v = visible_env;
    const std::string first = v.substr(0, v.find(','));
    if (first.find_first_not_of(" \t") == std::string::npos || first[0] == '-' || v == "NoDevFiles")
      return {false, false, "CUDA_VISIBLE_DEVICES=" + v + " hides every GPU"};
  }
  std::string found;
  if (has_numbered_entry(root / "dev", "nvidia", &found)) return {true, false, found + " exists"};
  std::error_code ec;
  const auto gpus = root / "proc/driver/nvidia/gpus";
  if (std::filesystem::directory_iterator(gpus, ec) != std::filesystem::directory_iterator{})
    return {true, false, gpus.string() + " lists a GPU"};
  return {false, false, "no /dev/nvidia<N> device, no /proc/driver/nvidia/gpus entry"};
}

inline GpuExpectation expect_gpu_here() {
  return expect_gpu(std::getenv("SUITE_EXPECT_GPU"), std::getenv("CUDA_VISIBLE_DEVICES"), "/");
}

enum class GpuSetup { skip, fail };

struct GpuSetupVerdict {
  GpuSetup action;
  std::string message;
};

// A GPU test could not set up (`what`): fail where a GPU is expected, skip (naming why none
// is) elsewhere. `build_lacks`: the build has no CUDA or NCCL, a choice made at build time,
// which skips unless SUITE_EXPECT_GPU=1.
inline GpuSetupVerdict gpu_setup_failed(const GpuExpectation& e, const std::string& what,
                                        bool build_lacks = false) {
  if (e.forced || (e.expected && !build_lacks))
    return {GpuSetup::fail, "a GPU is expected here (" + e.why + ") but the test cannot set up: " +
                                what + " (SUITE_EXPECT_GPU=0 skips GPU tests on purpose)"};
  if (build_lacks) return {GpuSetup::skip, what};
  return {GpuSetup::skip, "no GPU expected (" + e.why + "): " + what};
}

}  // namespace suite::gpu_gate

// In a test body, after a GPU set-up failed with `what`: fails or skips the test (returns).
#define SUITE_GPU_SETUP_FAILED(what, build_lacks)                                         \
  do {                                                                                    \
    const ::suite::gpu_gate::GpuSetupVerdict suite_gpu_verdict_ =                         \
        ::suite::gpu_gate::gpu_setup_failed(::suite::gpu_gate::expect_gpu_here(), (what), \
                                            (build_lacks));                               \
    if (suite_gpu_verdict_.action == ::suite::gpu_gate::GpuSetup::fail)                   \
      GTEST_FAIL() << suite_gpu_verdict_.message;                                         \
    GTEST_SKIP() << suite_gpu_verdict_.message;                                           \
  } while (0)

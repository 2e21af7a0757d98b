// Which OpenBLAS core a CPU's flags call for, on hand-listed CPUs (flags as their
// /proc/cpuinfo prints them, shortened to the instruction-set ones) and OpenBLAS releases
// (openblas_get_config()'s text of Debian's and of pip's builds).
#include "kernels/core/blas_cpu_core.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace suite::kernels::cpu {
namespace {

using Flags = std::set<std::string>;

const std::string kDebian12 =
    "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott SINGLE_THREADED";
const std::string kPip =
    "OpenBLAS 0.3.27  USE64BITINT DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64";

const Flags kCore2 = {"sse", "sse2", "pni", "ssse3"};
const Flags kHaswell = {"pni", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "bmi2"};
const Flags kSkylakeX = {"pni",     "ssse3",    "sse4_2",   "avx",      "avx2",    "fma",
                         "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"};
// Emerald Rapids (family 6, model 207) as this development VM shows it (AMX hidden).
const Flags kEmeraldRapids = {"pni",      "ssse3",       "sse4_2",      "avx",
                              "avx2",     "fma",         "avx512f",     "avx512dq",
                              "avx512cd", "avx512bw",    "avx512vl",    "avx512_vnni",
                              "avx_vnni", "avx512_bf16", "avx512_fp16", "avx512vbmi"};
// Knights Landing: AVX-512 foundation without VL/BW/DQ, which SkylakeX's kernels use.
const Flags kKnightsLanding = {"pni", "ssse3",   "sse4_2",   "avx",      "avx2",
                               "fma", "avx512f", "avx512cd", "avx512er", "avx512pf"};
const Flags kNeoverseN1 = {"fp", "asimd", "evtstrm", "aes", "crc32", "atomics", "asimddp"};

TEST(BlasCpuCore, Debian12OnEmeraldRapidsRunsSkylakeXNotPrescott) {
  // 0.3.21 knows no model 207 and falls back to Prescott; it refuses OPENBLAS_CORETYPE=Cooperlake.
  EXPECT_EQ(openblas_core_for(kEmeraldRapids, kDebian12), "SkylakeX");
  EXPECT_EQ(better_openblas_core("Prescott", kEmeraldRapids, kDebian12), "SkylakeX");
}

TEST(BlasCpuCore, NewerReleasesAcceptCooperlake) {
  EXPECT_EQ(openblas_core_for(kEmeraldRapids, kPip), "Cooperlake");
  EXPECT_EQ(better_openblas_core("SkylakeX", kEmeraldRapids, kPip), "Cooperlake");
  // A core newer than any it may be told to run is kept.
  EXPECT_EQ(better_openblas_core("SapphireRapids", kEmeraldRapids, kPip), std::nullopt);
}

TEST(BlasCpuCore, EachInstructionSetItsCore) {
  EXPECT_EQ(openblas_core_for(kCore2, kDebian12), "Core2");
  EXPECT_EQ(openblas_core_for(kHaswell, kDebian12), "Haswell");
  EXPECT_EQ(openblas_core_for(kSkylakeX, kDebian12), "SkylakeX");
  EXPECT_EQ(openblas_core_for(kSkylakeX, kPip), "SkylakeX");  // no avx512_bf16
  EXPECT_EQ(openblas_core_for(kKnightsLanding, kDebian12), "Haswell");
  EXPECT_EQ(openblas_core_for({"avx", "sse4_2", "pni"}, kDebian12), "Sandybridge");
  EXPECT_EQ(openblas_core_for({"sse4_2", "ssse3", "pni"}, kDebian12), "Nehalem");
  EXPECT_EQ(openblas_core_for({"sse", "sse2"}, kDebian12), "");  // no SSE3: none
}

TEST(BlasCpuCore, ACoreAsNewAsTheCpusIsKept) {
  EXPECT_EQ(better_openblas_core("SkylakeX", kEmeraldRapids, kDebian12), std::nullopt);
  EXPECT_EQ(better_openblas_core("Haswell", kHaswell, kDebian12), std::nullopt);
  // AMD's cores rank with Intel's of the same instructions: Zen on a Zen 2 (AVX2) stays.
  EXPECT_EQ(better_openblas_core("Zen", kHaswell, kDebian12), std::nullopt);
  EXPECT_EQ(better_openblas_core("Zen", kSkylakeX, kDebian12), "SkylakeX");  // Zen 4
  EXPECT_EQ(better_openblas_core("Sandybridge", kHaswell, kDebian12), "Haswell");
}

TEST(BlasCpuCore, NothingWhereTheLibraryOrCoreIsNotOneItKnows) {
  // Built for one core: OPENBLAS_CORETYPE means nothing to it.
  EXPECT_EQ(better_openblas_core("Prescott", kEmeraldRapids, "OpenBLAS 0.3.21 NO_AFFINITY"),
            std::nullopt);
  EXPECT_EQ(better_openblas_core("Prescott", kEmeraldRapids, ""), std::nullopt);
  EXPECT_EQ(better_openblas_core("Prescott", kEmeraldRapids, "BLIS 1.0 DYNAMIC_ARCH"),
            std::nullopt);
  EXPECT_EQ(better_openblas_core("NEOVERSEN1", kNeoverseN1, kDebian12), std::nullopt);
  EXPECT_EQ(better_openblas_core("Unknown", kEmeraldRapids, kDebian12), std::nullopt);
}

}  // namespace
}  // namespace suite::kernels::cpu

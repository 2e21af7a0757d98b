// The CPU backend's device name from /proc/cpuinfo: model and cores, on text as real kernels
// print it (the expected names are what lscpu reports for those machines).
#include "common/device/cpu_info.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace suite {
namespace {

// One processor entry of an x86 /proc/cpuinfo (this development VM's, flags shortened).
std::string x86_entry(int processor, int socket, int core, const std::string& model, int siblings,
                      int cores) {
  return "processor\t: " + std::to_string(processor) +
         "\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\nmodel name\t: " + model +
         "\nstepping\t: 1\nmicrocode\t: 0x1\ncpu MHz\t\t: 2599.998\ncache size\t: 491520 KB\n"
         "physical id\t: " +
         std::to_string(socket) + "\nsiblings\t: " + std::to_string(siblings) +
         "\ncore id\t\t: " + std::to_string(core) + "\ncpu cores\t: " + std::to_string(cores) +
         "\napicid\t\t: " + std::to_string(processor) +
         "\nfpu\t\t: yes\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep avx512f\n"
         "bogomips\t: 5199.99\naddress sizes\t: 48 bits physical, 57 bits virtual\n"
         "power management:\n\n";
}

TEST(CpuInfo, TheDevelopmentVm) {
  // lscpu: Model name: Intel(R) Xeon(R) Processor; Core(s) per socket: 2; Socket(s): 1;
  // Thread(s) per core: 1.
  const std::string text = x86_entry(0, 0, 0, "Intel(R) Xeon(R) Processor", 2, 2) +
                           x86_entry(1, 0, 1, "Intel(R) Xeon(R) Processor", 2, 2);
  EXPECT_EQ(cpu_device_name_from(text, 2), "Intel(R) Xeon(R) Processor (2 cores)");
}

TEST(CpuInfo, TwoSocketsWithHyperThreading) {
  // 2 sockets x 2 cores x 2 threads: processors 0-3 on socket 0, 4-7 on socket 1, each core
  // listed twice.
  const std::string model = "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz";
  std::string text;
  for (int p = 0; p < 8; ++p)
    text += x86_entry(p, p / 4, p % 2, model, 4, 2);
  EXPECT_EQ(cpu_device_name_from(text, 8), model + " (2 sockets, 4 cores, 8 threads)");
}

TEST(CpuInfo, PaddedAmdModelName) {
  std::string text;
  for (int p = 0; p < 4; ++p)
    text += x86_entry(p, 0, p, "AMD EPYC 7763 64-Core Processor                ", 4, 4);
  EXPECT_EQ(cpu_device_name_from(text, 4), "AMD EPYC 7763 64-Core Processor (4 cores)");
}

TEST(CpuInfo, GraceNamedByItsArmPart) {
  // NVIDIA Grace: Arm Neoverse-V2 cores (implementer 0x41, part 0xd4f; lscpu's Model name:
  // Neoverse-V2); no model name, no physical or core ids: one core per processor entry.
  std::string text;
  for (int p = 0; p < 3; ++p)
    text += "processor\t: " + std::to_string(p) +
            "\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm sve\nCPU implementer\t: 0x41\n"
            "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n\n";
  EXPECT_EQ(cpu_device_name_from(text, 3), "Neoverse-V2 (3 cores)");
  std::string other = text;
  for (auto at = other.find("0xd4f"); at != std::string::npos; at = other.find("0xd4f"))
    other.replace(at, 5, "0xabc");
  EXPECT_EQ(cpu_device_name_from(other, 3), "Arm CPU implementer 0x41 part 0xabc (3 cores)");
}

TEST(CpuInfo, NothingReadable) {
  EXPECT_EQ(cpu_device_name_from("", 6), "unknown CPU (6 cores)");
  EXPECT_EQ(cpu_device_name_from("", 1), "unknown CPU (1 core)");
}

TEST(CpuInfo, FlagsOfTheFirstProcessor) {
  const std::string text = x86_entry(0, 0, 0, "Intel(R) Xeon(R) Processor", 1, 1);
  EXPECT_EQ(cpu_flags_from(text),
            (std::set<std::string>{"fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8",
                                   "apic", "sep", "avx512f"}));
  EXPECT_EQ(cpu_flags_from("processor\t: 0\nFeatures\t: fp asimd sve\n"),
            (std::set<std::string>{"fp", "asimd", "sve"}));
  EXPECT_TRUE(cpu_flags_from("").empty());
}

TEST(CpuInfo, InstructionSetFlagsInTheirOrder) {
  // This development VM's (Emerald Rapids; its hypervisor hides AMX), the vector ones kept.
  const std::set<std::string> vm = {"pni",      "ssse3",       "sse4_2",      "avx",
                                    "avx2",     "fma",         "avx512f",     "avx512dq",
                                    "avx512cd", "avx512bw",    "avx512vl",    "avx512_vnni",
                                    "avx_vnni", "avx512_bf16", "avx512_fp16", "sha_ni"};
  EXPECT_EQ(cpu_isa_flags(vm),
            "sse4_2,avx,avx2,fma,avx512f,avx512bw,avx512vl,avx512_vnni,avx512_bf16,avx512_fp16");
  EXPECT_EQ(cpu_isa_flags({"fp", "asimd", "sve2", "sve", "i8mm", "bf16"}),
            "asimd,sve,sve2,bf16,i8mm");
  EXPECT_EQ(cpu_isa_flags({"fpu", "sse2"}), "none");
  EXPECT_EQ(cpu_isa_flags({}), "none");
}

TEST(CpuInfo, ThisMachineHasAName) {
  const std::string name = cpu_device_name();
  EXPECT_NE(name, "cpu");
  EXPECT_NE(name.find(" core"), std::string::npos) << name;
}

}  // namespace
}  // namespace suite

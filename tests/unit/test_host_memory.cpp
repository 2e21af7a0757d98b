// What the CPU backend reports as available: MemAvailable from /proc/meminfo (the page cache
// a build leaves counts), on text as the kernel prints it.
#include "common/device/host_memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace suite {
namespace {

// The head of this development VM's /proc/meminfo during a CI run (2026-12-03): 3 GB of page
// cache that the free pages leave out.
const char* kMeminfo =
    "MemTotal:       24683664 kB\n"
    "MemFree:        21144836 kB\n"
    "MemAvailable:   24026792 kB\n"
    "Buffers:           70372 kB\n"
    "Cached:          2999096 kB\n";

TEST(HostMemory, MemAvailableNotMemFree) {
  EXPECT_EQ(mem_available_from(kMeminfo), std::size_t{24026792} * 1024);
}

TEST(HostMemory, NoMemAvailableLine) {
  // Kernels before 3.14 print no MemAvailable: the caller falls back to the free pages.
  EXPECT_FALSE(mem_available_from("MemTotal:       24683664 kB\nMemFree:  412300 kB\n"));
  EXPECT_FALSE(mem_available_from(""));
  EXPECT_FALSE(mem_available_from("MemAvailable: lots\n"));
}

// MemAvailable as this test reads it itself; 0 when the kernel prints none.
double meminfo_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  unsigned long long kib = 0;
  while (in >> key)
    if (key == "MemAvailable:" && in >> kib)
      return 1024.0 * static_cast<double>(kib);
    else
      in.ignore(1 << 10, '\n');
  return 0;
}

TEST(HostMemory, ThisHostAgreesWithItsOwnMeminfo) {
  if (!std::ifstream("/proc/meminfo")) GTEST_SKIP() << "no /proc/meminfo (not Linux)";
  if (meminfo_available_bytes() == 0) GTEST_SKIP() << "this kernel prints no MemAvailable";
  // Tests beside this one start and end processes: the answer must lie between this test's
  // own reads just before and just after (16 MiB of slack), on one of three tries.
  double before = 0, got = 0, after = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    before = meminfo_available_bytes();
    got = static_cast<double>(host_memory_available());
    after = meminfo_available_bytes();
    const double slack = 16.0 * (1 << 20);
    if (got >= std::min(before, after) - slack && got <= std::max(before, after) + slack) return;
  }
  ADD_FAILURE() << "host_memory_available() " << got << " B, /proc/meminfo " << before
                << " B before and " << after << " B after";
}

}  // namespace
}  // namespace suite

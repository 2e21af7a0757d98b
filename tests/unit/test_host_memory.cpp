// What the CPU backend reports as available: MemAvailable from /proc/meminfo (the page cache
// a build leaves counts), on text as the kernel prints it.
#include "common/host_memory.hpp"

#include <gtest/gtest.h>

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

TEST(HostMemory, ThisHostAgreesWithItsOwnMeminfo) {
  std::ifstream in("/proc/meminfo");
  if (!in) GTEST_SKIP() << "no /proc/meminfo (not Linux)";
  std::string key;
  unsigned long long kib = 0, found = 0;
  while (in >> key)
    if (key == "MemAvailable:" && in >> kib)
      found = kib;
    else
      in.ignore(1 << 10, '\n');
  if (!found) GTEST_SKIP() << "this kernel prints no MemAvailable";
  // Read a moment apart: allow the host's own churn (64 MiB).
  const double got = static_cast<double>(host_memory_available()), want = 1024.0 * found;
  EXPECT_NEAR(got, want, 64.0 * (1 << 20));
}

}  // namespace
}  // namespace suite

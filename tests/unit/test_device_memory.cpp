// The allocator's own count of a device's memory: live bytes follow every allocation and free,
// the peak holds the most live at once since its reset, zero-byte requests allocate nothing.
#include <gtest/gtest.h>

#include <utility>

#include "common/device/device.hpp"

namespace suite {
namespace {

TEST(DeviceMemory, CountsLiveAndPeakBytesOfEveryAllocation) {
  auto dev = make_cpu_device();
  const AllocationCounters start = dev->allocation_counters();
  {
    Buffer a = dev->alloc(1000);
    Buffer b = dev->alloc(24);
    EXPECT_EQ(dev->allocation_counters().live - start.live, 1024);
    {
      Buffer c = dev->alloc(4096);
      EXPECT_EQ(dev->allocation_counters().live - start.live, 5120);
    }
    EXPECT_EQ(dev->allocation_counters().live - start.live, 1024);
    EXPECT_EQ(dev->allocation_counters().peak - start.live, 5120);
    dev->reset_allocation_peak();
    EXPECT_EQ(dev->allocation_counters().peak - start.live, 1024);
    Buffer moved = std::move(a);  // ownership moves, nothing is freed or counted twice
    EXPECT_EQ(dev->allocation_counters().live - start.live, 1024);
    Buffer none = dev->alloc(0);
    EXPECT_EQ(none.data(), nullptr);
    EXPECT_EQ(dev->allocation_counters().allocations - start.allocations, 3);
  }
  EXPECT_EQ(dev->allocation_counters().live, start.live);
  // Pinned host memory is not device memory: not counted.
  Buffer host = dev->alloc_host(512);
  EXPECT_EQ(dev->allocation_counters().live, start.live);
}

}  // namespace
}  // namespace suite

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "common/device/cpu_info.hpp"
#include "common/device/device.hpp"
#include "common/device/host_memory.hpp"
#include "common/harness/run_clock.hpp"
#include "common/sim/sim.hpp"

namespace suite {
namespace {

class WallTimer final : public IntervalTimer {
 public:
  void start() override { t0_ = Clock::now(); }
  void stop() override { t1_ = Clock::now(); }
  double seconds() override { return std::chrono::duration<double>(t1_ - t0_).count(); }

 private:
  using Clock = RunClock;  // steady_clock; MPI_Wtime (simulated) in the SMPI build
  Clock::time_point t0_, t1_;
};

Buffer host_alloc(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;  // a cache line, and enough for any vector load
  std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = rounded ? std::aligned_alloc(kAlign, rounded) : nullptr;
  if (rounded && !p) throw std::bad_alloc();
  return Buffer(p, bytes, [](void* q) { std::free(q); });
}

class CpuDevice final : public Device {
 public:
  Backend backend() const override { return Backend::cpu; }
  // The CPU model and its cores: what tells one CPU machine's results from another's.
  std::string name() const override { return cpu_device_name(); }
  std::string uuid() const override { return ""; }
  Buffer alloc_host(std::size_t bytes) override { return host_alloc(bytes); }
  // Modeled compute's placeholders (common/sim/sim.hpp) hold no values: writes into one are
  // skipped, reads from one give zeros.
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (!bytes || sim::is_placeholder(dst)) return;
    if (sim::is_placeholder(src))
      std::memset(dst, 0, bytes);
    else
      std::memcpy(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    copy_to_host(dst, src, bytes);
  }
  void copy_to_host_concurrent(void* dst, const void* src, std::size_t bytes) override {
    copy_to_host(dst, src, bytes);
  }
  void copy_from_host_concurrent(void* dst, const void* src, std::size_t bytes) override {
    copy_from_host(dst, src, bytes);
  }
  void mark_queued_work() override {}
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override {
    copy_from_host(dst, src, bytes);
  }
  void copy_rows_on_device(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                           std::size_t width, std::size_t rows) override {
    if (!width || !rows || sim::is_placeholder(dst)) return;
    for (std::size_t r = 0; r < rows; ++r)
      copy_to_host(static_cast<std::byte*>(dst) + r * dst_pitch,
                   static_cast<const std::byte*>(src) + r * src_pitch, width);
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    if (bytes > 0 && !sim::is_placeholder(dst)) std::memset(dst, 0, bytes);
  }
  // This rank's share of what the host can still give (MemAvailable: the page cache a build
  // leaves counts as available); under SMPI every simulated rank lives in this process.
  std::size_t memory_available() const override {
    const std::size_t bytes = host_memory_available();
    return bytes == SIZE_MAX ? bytes : bytes / static_cast<std::size_t>(sim::ranks_per_process());
  }
  void synchronize() override {}
  std::unique_ptr<IntervalTimer> make_timer() override { return std::make_unique<WallTimer>(); }
  void* stream() const override { return nullptr; }

 protected:
  Buffer allocate(std::size_t bytes) override {
    Buffer b = sim::alloc_placeholder(bytes);  // modeled compute's large buffers
    return b.data() ? std::move(b) : host_alloc(bytes);
  }
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() {
  return std::make_unique<CpuDevice>();
}

#if !defined(SUITE_HAVE_CUDA)
std::unique_ptr<Device> make_cuda_device(int) {
  return nullptr;
}
int visible_cuda_devices() {
  return 0;
}
std::string cuda_runtime_version() {
  return "none";
}
void select_gpu_before_mpi(int, char**) {}  // no CUDA: nothing to select
#endif

}  // namespace suite

// Where compute and buffers live: the CPU backend (host memory, steady_clock) or one CUDA
// device per rank (device memory, one stream, CUDA events). Benchmarks talk to this
// interface only, so the same case body runs on either backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace suite {

enum class Backend { cpu, cuda };

constexpr std::string_view backend_name(Backend b) {
  return b == Backend::cpu ? "cpu" : "cuda";
}

// Move-only owner of one allocation (host, pinned host or device memory).
class Buffer {
 public:
  using Deleter = std::function<void(void*)>;
  Buffer() = default;
  Buffer(void* ptr, std::size_t bytes, Deleter deleter) : ptr_(ptr, deleter), bytes_(bytes) {}
  void* data() const { return ptr_.get(); }
  std::size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_.get());
  }
  // The same allocation, with `hook` run after it is freed (Device::alloc counts with it).
  Buffer on_free(std::function<void()> hook) &&;

 private:
  std::unique_ptr<void, Deleter> ptr_{nullptr, Deleter([](void*) {})};
  std::size_t bytes_ = 0;
};

// Times an interval of work submitted to the device (wall clock on the CPU, events on the
// device's stream on CUDA). seconds() waits for the interval to finish.
class IntervalTimer {
 public:
  virtual ~IntervalTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double seconds() = 0;
};

// What alloc() has handed out on a device (bytes): live now, the most live at once since the
// last reset_allocation_peak(), and allocations made. Measured by the allocator itself, so a
// method's memory is what it really allocated, not a formula of its block sizes.
struct AllocationCounters {
  std::int64_t live = 0;
  std::int64_t peak = 0;
  std::int64_t allocations = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual Backend backend() const = 0;
  virtual std::string name() const = 0;
  // Identifies the physical device (GPU UUID), so ranks that share one can be detected
  // whatever CUDA_VISIBLE_DEVICES each rank was given; empty on the CPU backend.
  virtual std::string uuid() const = 0;
  // Memory the kernels and transports work on (device memory on CUDA), counted in
  // allocation_counters() until the buffer is freed.
  Buffer alloc(std::size_t bytes);
  AllocationCounters allocation_counters() const { return *counters_; }
  // Starts a new peak from what is live now.
  void reset_allocation_peak() { counters_->peak = counters_->live; }
  // Host memory suited for transfers to and from the device (pinned on CUDA).
  virtual Buffer alloc_host(std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* dev_src, std::size_t bytes) = 0;
  virtual void copy_from_host(void* dev_dst, const void* host_src, std::size_t bytes) = 0;
  // Copies on a second stream, for transfers that overlap the work queued on stream() (the
  // ring's host-staged exchange). Both return when the copy is done.
  // To the host: `dev_src` must have no pending writer on stream().
  virtual void copy_to_host_concurrent(void* host_dst, const void* dev_src, std::size_t bytes) = 0;
  // To the device: first waits for the work that was queued on stream() when
  // mark_queued_work() was last called (e.g. the kernel that last read `dev_dst`), not for
  // anything queued since.
  virtual void copy_from_host_concurrent(void* dev_dst, const void* host_src,
                                         std::size_t bytes) = 0;
  virtual void mark_queued_work() = 0;
  // Device-to-device copy, ordered on stream() (asynchronous on CUDA).
  virtual void copy_on_device(void* dst, const void* src, std::size_t bytes) = 0;
  // `rows` rows of `width` bytes from src (rows `src_pitch` bytes apart) to dst (`dst_pitch`
  // apart): a column block of a row-major matrix, in one call (cudaMemcpy2DAsync), ordered on
  // stream().
  virtual void copy_rows_on_device(void* dst, std::size_t dst_pitch, const void* src,
                                   std::size_t src_pitch, std::size_t width, std::size_t rows) = 0;
  // Sets `bytes` bytes at dst to zero, ordered on stream() (asynchronous on CUDA): gradient
  // accumulators start from it.
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  // Bytes this process could still allocate with alloc() (CUDA: free device memory; CPU:
  // available physical memory), to refuse a case that cannot fit before allocating it.
  virtual std::size_t memory_available() const = 0;
  // Waits for all work submitted to this device.
  virtual void synchronize() = 0;
  virtual std::unique_ptr<IntervalTimer> make_timer() = 0;
  // The cudaStream_t that kernels and NCCL use (nullptr on the CPU backend).
  virtual void* stream() const = 0;

 protected:
  // The backend's own allocation behind alloc().
  virtual Buffer allocate(std::size_t bytes) = 0;

 private:
  // Shared with the buffers' deleters, which may outlive a moved-from device.
  std::shared_ptr<AllocationCounters> counters_ = std::make_shared<AllocationCounters>();
};

std::unique_ptr<Device> make_cpu_device();
// One device per rank, chosen by node-local rank (local_rank % visible devices).
std::unique_ptr<Device> make_cuda_device(int local_rank);

// Selects this process's GPU from the launcher's node-local rank (Open MPI, Slurm, MPICH)
// before MPI starts, so a CUDA-aware MPI sets up on that GPU rather than on GPU 0 for every
// rank. Does nothing with --backend cpu, without CUDA, or when no local rank is given.
void select_gpu_before_mpi(int argc, char** argv);

// Number of CUDA devices this process sees: 0 when built without CUDA or when no driver or
// device is present (never an error).
int visible_cuda_devices();
// "13.0" style runtime version, or "none".
std::string cuda_runtime_version();

}  // namespace suite

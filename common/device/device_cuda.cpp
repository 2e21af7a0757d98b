// CUDA backend of Device. Compiled only when the build found nvcc (SUITE_HAVE_CUDA).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/device/device.hpp"
#include "common/harness/errors.hpp"
#include "kernels/core/cuda_check.hpp"

namespace suite {
namespace {

class EventTimer final : public IntervalTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    SUITE_CUDA_CHECK(cudaEventCreate(&start_));
    SUITE_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start() override { SUITE_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
  void stop() override { SUITE_CUDA_CHECK(cudaEventRecord(stop_, stream_)); }
  double seconds() override {
    SUITE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SUITE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_{}, stop_{};
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    SUITE_CUDA_CHECK(cudaSetDevice(ordinal_));
    SUITE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SUITE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
    SUITE_CUDA_CHECK(cudaEventCreateWithFlags(&marked_, cudaEventDisableTiming));
    SUITE_CUDA_CHECK(cudaEventRecord(marked_, stream_));  // an empty mark: nothing to wait for
    cudaDeviceProp prop{};
    SUITE_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
    name_ = prop.name;
    char hex[3];
    for (unsigned char byte : prop.uuid.bytes) {
      std::snprintf(hex, sizeof hex, "%02x", byte);
      uuid_ += hex;
    }
  }
  ~CudaDevice() override {
    cudaEventDestroy(marked_);
    cudaStreamDestroy(side_stream_);
    cudaStreamDestroy(stream_);
  }
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  Backend backend() const override { return Backend::cuda; }
  std::string uuid() const override { return uuid_; }
  std::string name() const override {
    return name_ + " (GPU " + std::to_string(ordinal_) + ", " + uuid_.substr(0, 8) + ")";
  }
  Buffer alloc_host(std::size_t bytes) override {
    void* p = nullptr;
    if (bytes) SUITE_CUDA_CHECK(cudaMallocHost(&p, bytes));
    return Buffer(p, bytes, [](void* q) { cudaFreeHost(q); });
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    SUITE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SUITE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    SUITE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    SUITE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_to_host_concurrent(void* dst, const void* src, std::size_t bytes) override {
    SUITE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, side_stream_));
    SUITE_CUDA_CHECK(cudaStreamSynchronize(side_stream_));
  }
  void copy_from_host_concurrent(void* dst, const void* src, std::size_t bytes) override {
    SUITE_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, marked_, 0));
    SUITE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, side_stream_));
    SUITE_CUDA_CHECK(cudaStreamSynchronize(side_stream_));
  }
  void mark_queued_work() override { SUITE_CUDA_CHECK(cudaEventRecord(marked_, stream_)); }
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override {
    if (bytes)
      SUITE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void copy_rows_on_device(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                           std::size_t width, std::size_t rows) override {
    if (width && rows)
      SUITE_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows,
                                         cudaMemcpyDeviceToDevice, stream_));
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    if (bytes > 0) SUITE_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
  }
  std::size_t memory_available() const override {
    std::size_t free = 0, total = 0;
    SUITE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }
  void synchronize() override { SUITE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  std::unique_ptr<IntervalTimer> make_timer() override {
    return std::make_unique<EventTimer>(stream_);
  }
  void* stream() const override { return stream_; }

 protected:
  Buffer allocate(std::size_t bytes) override {
    void* p = nullptr;
    if (bytes) SUITE_CUDA_CHECK(cudaMalloc(&p, bytes));
    return Buffer(p, bytes, [](void* q) { cudaFree(q); });
  }

 private:
  int ordinal_;
  cudaStream_t stream_{};
  cudaStream_t side_stream_{};  // staging copies that must not wait for stream_'s kernels
  cudaEvent_t marked_{};        // mark_queued_work(): what copy_from_host_concurrent waits for
  std::string name_;
  std::string uuid_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int local_rank) {
  int n = visible_cuda_devices();
  if (n == 0) throw UsageError("--backend cuda: no CUDA device is visible to " + rank_label());
  return std::make_unique<CudaDevice>(local_rank % n);
}

void select_gpu_before_mpi(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend=cpu" ||
        (a == "--backend" && i + 1 < argc && std::string(argv[i + 1]) == "cpu"))
      return;
  }
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                          "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK"}) {
    const char* v = std::getenv(var);
    if (!v) continue;
    int n = visible_cuda_devices();
    if (n > 0) cudaSetDevice(std::atoi(v) % n);  // best effort: make_cuda_device checks again
    return;
  }
}

int visible_cuda_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later queries start clean
    return 0;
  }
  return n;
}

std::string cuda_runtime_version() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace suite

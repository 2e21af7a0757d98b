// NCCL transport: collectives and grouped send/recv on the device's stream. The unique id is
// spread with MPI. Built only when NCCL was found; otherwise make_nccl_comm explains why not.
#include "common/comm.hpp"
#include "common/errors.hpp"

#if defined(SUITE_HAVE_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>

#define SUITE_NCCL_CHECK(expr)                                                          \
  do {                                                                                  \
    ncclResult_t suite_nr_ = (expr);                                                    \
    if (suite_nr_ != ncclSuccess)                                                       \
      ::suite::fatal(std::string(#expr) + " failed: " + ncclGetErrorString(suite_nr_) + \
                         ::suite::last_nccl_error(),                                    \
                     __FILE__, __LINE__);                                               \
  } while (0)

namespace suite {

// NCCL's own explanation of its last failure, when it has one.
std::string last_nccl_error() {
  const char* text = ncclGetLastError(nullptr);
  return text && *text ? std::string(" (") + text + ")" : std::string();
}

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::fp32:
      return ncclFloat32;
    case DType::fp64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
  }
  return ncclFloat32;
}

class NcclComm final : public Comm {
 public:
  NcclComm(Device& device, MPI_Comm comm)
      : Comm(comm), stream_(static_cast<cudaStream_t>(device.stream())) {
    ncclUniqueId id{};
    if (rank_ == 0) SUITE_NCCL_CHECK(ncclGetUniqueId(&id));
    SUITE_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm_));
    SUITE_NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_));
  }
  ~NcclComm() override {
    if (nccl_) ncclCommDestroy(nccl_);
  }

  Transport transport() const override { return Transport::nccl; }
  std::size_t max_count() const override { return SIZE_MAX; }
  std::string detail() const override { return "nccl"; }

  void all_reduce(const void* send, void* recv, std::size_t count, DType t) override {
    SUITE_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(t), ncclSum, nccl_, stream_));
    std::int64_t n = static_cast<std::int64_t>(count * dtype_size(t));
    count_both(all_reduce_bytes(n));
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t) override {
    SUITE_NCCL_CHECK(
        ncclReduceScatter(send, recv, recv_count, nccl_type(t), ncclSum, nccl_, stream_));
    count_both(static_cast<std::int64_t>(recv_count * dtype_size(t)) * (size_ - 1));
  }
  void all_gather(const void* send, void* recv, std::size_t send_count, DType t) override {
    SUITE_NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(t), nccl_, stream_));
    count_both(static_cast<std::int64_t>(send_count * dtype_size(t)) * (size_ - 1));
  }
  void all_to_all(const void* send, void* recv, std::size_t count_per_rank, DType t) override {
    std::vector<std::size_t> counts(size_, count_per_rank), displs(size_);
    for (int r = 0; r < size_; ++r)
      displs[r] = r * count_per_rank;
    all_to_all_v(send, counts, displs, recv, counts, displs, t);
  }
  void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                    const std::vector<std::size_t>& send_displs, void* recv,
                    const std::vector<std::size_t>& recv_counts,
                    const std::vector<std::size_t>& recv_displs, DType t) override {
    const std::size_t e = dtype_size(t);
    auto* s = static_cast<const std::byte*>(send);
    auto* r = static_cast<std::byte*>(recv);
    std::int64_t sent = 0, got = 0;
    SUITE_NCCL_CHECK(ncclGroupStart());
    for (int peer = 0; peer < size_; ++peer) {
      // Zero-size pairs are skipped on both sides, so uneven splits cannot leave a peer waiting.
      if (send_counts[peer])
        SUITE_NCCL_CHECK(ncclSend(s + send_displs[peer] * e, send_counts[peer], nccl_type(t), peer,
                                  nccl_, stream_));
      if (recv_counts[peer])
        SUITE_NCCL_CHECK(ncclRecv(r + recv_displs[peer] * e, recv_counts[peer], nccl_type(t), peer,
                                  nccl_, stream_));
      if (peer != rank_) {
        sent += static_cast<std::int64_t>(send_counts[peer] * e);
        got += static_cast<std::int64_t>(recv_counts[peer] * e);
      }
    }
    SUITE_NCCL_CHECK(ncclGroupEnd());
    count(sent, got);
  }
  void start_exchange(const void* send, int to, void* recv, int from, std::size_t n,
                      DType t) override {
    SUITE_NCCL_CHECK(ncclGroupStart());
    SUITE_NCCL_CHECK(ncclSend(send, n, nccl_type(t), to, nccl_, stream_));
    SUITE_NCCL_CHECK(ncclRecv(recv, n, nccl_type(t), from, nccl_, stream_));
    SUITE_NCCL_CHECK(ncclGroupEnd());
    std::int64_t bytes = static_cast<std::int64_t>(n * dtype_size(t));
    count(to == rank_ ? 0 : bytes, from == rank_ ? 0 : bytes);
  }
  // Stream-ordered: later work on the same stream already waits for the exchange.
  void finish_exchange() override {}
  void barrier() override {
    if (cudaStreamSynchronize(stream_) != cudaSuccess) SUITE_FATAL("cudaStreamSynchronize failed");
    SUITE_MPI_CHECK(MPI_Barrier(comm_));
  }

 private:
  cudaStream_t stream_;
  ncclComm_t nccl_ = nullptr;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(Device& device, MPI_Comm comm) {
  if (device.backend() != Backend::cuda)
    throw UsageError(
        "--transport nccl needs --backend cuda (use --transport mpi on the CPU backend)");
  return std::make_unique<NcclComm>(device, comm);
}

std::string nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

}  // namespace suite

#else

namespace suite {
std::unique_ptr<Comm> make_nccl_comm(Device&, MPI_Comm) {
  throw UsageError(
      "--transport nccl: this build has no NCCL (rebuild where nvcc and NCCL are found)");
}
std::string nccl_version() {
  return "none";
}
}  // namespace suite

#endif

// NCCL transport: collectives and grouped send/recv on the device's stream. The unique id is
// spread with MPI. Built only when NCCL was found; otherwise make_nccl_comm explains why not.
#include "common/harness/errors.hpp"
#include "common/transport/comm.hpp"

#if defined(SUITE_HAVE_NCCL)
#include <map>
#include <vector>

#include "common/transport/nccl_check.hpp"

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
    SUITE_CUDA_OK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    SUITE_CUDA_OK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  }
  ~NcclComm() override {
    for (const auto& [ticket, done] : a2a_in_flight_)
      cudaEventDestroy(done);
    for (cudaEvent_t done : spare_done_)
      cudaEventDestroy(done);
    if (ready_) cudaEventDestroy(ready_);
    if (comm_stream_) cudaStreamDestroy(comm_stream_);
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
    grouped_all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, t,
                         stream_);
  }
  // Started on the transport's own stream after the work queued so far (the rows' producer and
  // the last reader of recv), so the experts queued on the device's stream meanwhile overlap it;
  // finish makes later work on the device's stream wait for it, the host does not wait.
  // Exchanges started one after another run in that order on that stream.
  int start_all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                         const std::vector<std::size_t>& send_displs, void* recv,
                         const std::vector<std::size_t>& recv_counts,
                         const std::vector<std::size_t>& recv_displs, DType t) override {
    SUITE_CUDA_OK(cudaEventRecord(ready_, stream_));
    SUITE_CUDA_OK(cudaStreamWaitEvent(comm_stream_, ready_, 0));
    grouped_all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, t,
                         comm_stream_);
    cudaEvent_t done = nullptr;
    if (spare_done_.empty()) {
      SUITE_CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    } else {
      done = spare_done_.back();
      spare_done_.pop_back();
    }
    SUITE_CUDA_OK(cudaEventRecord(done, comm_stream_));
    a2a_in_flight_[next_ticket_] = done;
    return next_ticket_++;
  }
  void finish_all_to_all_v(int ticket) override {
    if (ticket < 0) return;
    const auto it = a2a_in_flight_.find(ticket);
    SUITE_CHECK(it != a2a_in_flight_.end(), "finish_all_to_all_v of a ticket not in flight");
    SUITE_CUDA_OK(cudaStreamWaitEvent(stream_, it->second, 0));
    spare_done_.push_back(it->second);
    a2a_in_flight_.erase(it);
  }
  bool nonblocking_all_to_all_v() const override { return true; }
  std::string all_to_all_v_overlap() const override {
    return "nccl grouped send/recv on a communication stream, ordered by CUDA events";
  }
  // The exchange runs on the transport's own stream, so the attention queued on the device's
  // stream meanwhile overlaps it; events order the two streams both ways.
  using Comm::start_exchange;
  void start_exchange(const std::vector<ExchangePart>& parts, int to, int from) override {
    SUITE_CHECK(!exchange_active_, "start_exchange while another exchange is in flight");
    // Work queued so far (what produced `send`, and the compute that last read `recv`) first.
    SUITE_CUDA_OK(cudaEventRecord(ready_, stream_));
    SUITE_CUDA_OK(cudaStreamWaitEvent(comm_stream_, ready_, 0));
    if (log_used_ == log_events_.size()) log_events_.push_back(EventPair{});
    EventPair& ev = log_events_[log_used_];
    SUITE_CUDA_OK(cudaEventRecord(ev.start, comm_stream_));
    SUITE_NCCL_CHECK(ncclGroupStart());
    std::int64_t bytes = 0;
    for (const ExchangePart& part : parts) {
      SUITE_NCCL_CHECK(
          ncclSend(part.send, part.count, nccl_type(part.type), to, nccl_, comm_stream_));
      SUITE_NCCL_CHECK(
          ncclRecv(part.recv, part.count, nccl_type(part.type), from, nccl_, comm_stream_));
      bytes += static_cast<std::int64_t>(part.count * dtype_size(part.type));
    }
    SUITE_NCCL_CHECK(ncclGroupEnd());
    SUITE_CUDA_OK(cudaEventRecord(ev.done, comm_stream_));
    exchange_active_ = true;
    count(to == rank_ ? 0 : bytes, from == rank_ ? 0 : bytes);
  }
  // Later work on the device's stream waits for the received block; the host does not.
  void finish_exchange() override {
    SUITE_CHECK(exchange_active_, "finish_exchange without start_exchange");
    SUITE_CUDA_OK(cudaStreamWaitEvent(stream_, log_events_[log_used_].done, 0));
    ++log_used_;
    exchange_active_ = false;
  }
  std::vector<ExchangeTiming> exchange_log() override {
    std::vector<ExchangeTiming> out;
    for (std::size_t i = 0; i < log_used_; ++i) {
      SUITE_CUDA_OK(cudaEventSynchronize(log_events_[i].done));
      float ms = 0;
      SUITE_CUDA_OK(cudaEventElapsedTime(&ms, log_events_[i].start, log_events_[i].done));
      out.push_back({ms * 1e-3, false});
    }
    return out;
  }
  void clear_exchange_log() override { log_used_ = 0; }
  std::string overlap_mechanism() const override {
    return "nccl send/recv on a communication stream, ordered by CUDA events";
  }
  void barrier() override {
    if (cudaStreamSynchronize(stream_) != cudaSuccess) SUITE_FATAL("cudaStreamSynchronize failed");
    SUITE_MPI_CHECK(MPI_Barrier(comm_));
  }

 private:
  cudaStream_t stream_;
  cudaStream_t comm_stream_ = nullptr;  // ring exchanges, overlapping the compute on stream_
  cudaEvent_t ready_ = nullptr;
  // Start / done events of each exchange since clear_exchange_log(), reused across steps.
  struct EventPair {
    EventPair() {
      SUITE_CUDA_OK(cudaEventCreate(&start));
      SUITE_CUDA_OK(cudaEventCreate(&done));
    }
    ~EventPair() {
      if (start) cudaEventDestroy(start);
      if (done) cudaEventDestroy(done);
    }
    EventPair(EventPair&& o) noexcept : start(o.start), done(o.done) { o.start = o.done = nullptr; }
    EventPair(const EventPair&) = delete;
    EventPair& operator=(const EventPair&) = delete;
    EventPair& operator=(EventPair&&) = delete;
    cudaEvent_t start = nullptr, done = nullptr;
  };
  std::vector<EventPair> log_events_;
  std::size_t log_used_ = 0;
  bool exchange_active_ = false;
  // Started all-to-all-vs by ticket (their done events), and done events free for reuse.
  std::map<int, cudaEvent_t> a2a_in_flight_;
  std::vector<cudaEvent_t> spare_done_;
  int next_ticket_ = 0;
  ncclComm_t nccl_ = nullptr;

  // One grouped send/recv per peer on `stream`; zero-size pairs are skipped on both sides, so
  // uneven splits cannot leave a peer waiting.
  void grouped_all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                            const std::vector<std::size_t>& send_displs, void* recv,
                            const std::vector<std::size_t>& recv_counts,
                            const std::vector<std::size_t>& recv_displs, DType t,
                            cudaStream_t stream) {
    const std::size_t e = dtype_size(t);
    auto* s = static_cast<const std::byte*>(send);
    auto* r = static_cast<std::byte*>(recv);
    std::int64_t sent = 0, got = 0;
    SUITE_NCCL_CHECK(ncclGroupStart());
    for (int peer = 0; peer < size_; ++peer) {
      if (send_counts[peer])
        SUITE_NCCL_CHECK(ncclSend(s + send_displs[peer] * e, send_counts[peer], nccl_type(t), peer,
                                  nccl_, stream));
      if (recv_counts[peer])
        SUITE_NCCL_CHECK(ncclRecv(r + recv_displs[peer] * e, recv_counts[peer], nccl_type(t), peer,
                                  nccl_, stream));
      if (peer != rank_) {
        sent += static_cast<std::int64_t>(send_counts[peer] * e);
        got += static_cast<std::int64_t>(recv_counts[peer] * e);
      }
    }
    SUITE_NCCL_CHECK(ncclGroupEnd());
    count(sent, got);
  }
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

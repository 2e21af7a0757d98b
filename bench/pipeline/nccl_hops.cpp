// The hops over NCCL (CUDA builds with NCCL): each channel this rank is an end of (hop_channels)
// has a communicator of its two ranks and a stream of its own, so its messages match in issue
// order and never wait behind another channel's. A send encodes the host rows into fp32, copies
// them to a device staging buffer on the copy stream and enqueues ncclSend after that copy on
// the channel's stream; a receive enqueues ncclRecv on the channel's stream when posted and
// records an event, and its wait synchronises that event and copies the values back to host
// rows. The host never waits on a send until the step's end, so ranks proceed as the schedule's
// rendezvous run says (rendezvous_stall); the copy stream holds copies only, so a copy never
// waits for a peer. Staging buffers and events are reused, and freed only when the transport
// goes: cudaFree may wait for the whole device, where a send may wait for a peer.
#include <map>
#include <utility>
#include <vector>

#include "bench/pipeline/hop_transport.hpp"
#include "common/device/typed_host.hpp"
#include "common/transport/nccl_check.hpp"

namespace suite::pipeline {

namespace {

constexpr DType kWire = DType::fp32;

class NcclHops final : public HopTransport {
 public:
  NcclHops(const Schedule& schedule, Comm& pp) : rank_(pp.rank()) {
    // Every rank walks the same channels in the same order: the id's broadcast is collective
    // over the PP group, so each pair's ncclCommInitRank meets the other end's.
    for (const ChannelOrder& order : hop_channels(schedule)) {
      ncclUniqueId id{};
      if (rank_ == order.sender) SUITE_NCCL_CHECK(ncclGetUniqueId(&id));
      SUITE_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, order.sender, pp.mpi_comm()));
      if (rank_ != order.sender && rank_ != order.receiver) continue;
      Channel& c = channels_[order.channel.index()];
      c.sends = rank_ == order.sender;
      c.order = c.sends ? order.sent : order.received;
      c.peer = c.sends ? 1 : 0;  // the sender is rank 0 of the pair
      SUITE_NCCL_CHECK(ncclCommInitRank(&c.nccl, 2, id, c.sends ? 0 : 1));
      SUITE_CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    }
    SUITE_CUDA_OK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    SUITE_CUDA_OK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  }

  ~NcclHops() override {
    for (auto& [index, c] : channels_)
      if (c.stream) cudaStreamSynchronize(c.stream);
    for (auto& [bytes, buffers] : spare_buffers_)
      for (void* b : buffers)
        cudaFree(b);
    for (cudaEvent_t e : spare_events_)
      cudaEventDestroy(e);
    if (copied_) cudaEventDestroy(copied_);
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
    for (auto& [index, c] : channels_) {
      if (c.stream) cudaStreamDestroy(c.stream);
      if (c.nccl) ncclCommDestroy(c.nccl);
    }
  }

  void post_receive(const HopChannel& hc, int mb, std::size_t values, int) override {
    Channel& c = next_of(hc, mb, false);
    Message m{take_buffer(values), values, take_event(), {}};
    SUITE_NCCL_CHECK(ncclRecv(m.device, values, ncclFloat32, c.peer, c.nccl, c.stream));
    SUITE_CUDA_OK(cudaEventRecord(m.done, c.stream));
    posted_[{hc.index(), mb}] = std::move(m);
  }

  Rows wait_receive(const HopChannel& hc, int mb, int) override {
    const auto it = posted_.find({hc.index(), mb});
    SUITE_CHECK(it != posted_.end(), "a hop's receive is posted before it is waited for");
    Message& m = it->second;
    SUITE_CUDA_OK(cudaEventSynchronize(m.done));
    std::vector<std::byte> host(m.values * dtype_size(kWire));
    SUITE_CUDA_OK(
        cudaMemcpyAsync(host.data(), m.device, host.size(), cudaMemcpyDeviceToHost, copy_stream_));
    SUITE_CUDA_OK(cudaStreamSynchronize(copy_stream_));
    Rows rows = decode(host.data(), m.values, kWire);
    release(m);
    posted_.erase(it);
    return rows;
  }

  void post_send(const HopChannel& hc, int mb, Rows rows, std::size_t values, int) override {
    SUITE_CHECK(rows.size() == values, "a hop's rows fill its values (no placeholders on a GPU)");
    Channel& c = next_of(hc, mb, true);
    Message m{take_buffer(rows.size()), rows.size(), take_event(), encode(rows, kWire)};
    SUITE_CUDA_OK(cudaMemcpyAsync(m.device, m.host.data(), m.host.size(), cudaMemcpyHostToDevice,
                                  copy_stream_));
    SUITE_CUDA_OK(cudaEventRecord(copied_, copy_stream_));
    SUITE_CUDA_OK(cudaStreamWaitEvent(c.stream, copied_, 0));
    SUITE_NCCL_CHECK(ncclSend(m.device, m.values, ncclFloat32, c.peer, c.nccl, c.stream));
    SUITE_CUDA_OK(cudaEventRecord(m.done, c.stream));
    bytes_sent_ += static_cast<std::int64_t>(m.host.size());
    in_flight_.push_back(std::move(m));
  }

  void test_sends() override {
    std::vector<Message> pending;
    for (Message& m : in_flight_) {
      const cudaError_t state = cudaEventQuery(m.done);
      if (state == cudaErrorNotReady) {
        pending.push_back(std::move(m));
        continue;
      }
      SUITE_CUDA_OK(state);
      release(m);
    }
    in_flight_ = std::move(pending);
  }

  void wait_sends() override {
    for (Message& m : in_flight_) {
      SUITE_CUDA_OK(cudaEventSynchronize(m.done));
      release(m);
    }
    in_flight_.clear();
    for (auto& [index, c] : channels_)
      c.next = 0;  // the step's messages are all through: the next step starts the orders again
  }

  std::int64_t bytes_sent() const override { return bytes_sent_; }
  void reset_bytes() override { bytes_sent_ = 0; }

 private:
  struct Channel {
    ncclComm_t nccl = nullptr;
    cudaStream_t stream = nullptr;
    bool sends = false;      // this rank's end: the sender (or the receiver)
    int peer = 0;            // the other end's rank in the pair
    std::vector<int> order;  // the micro-batches this end posts, in turn
    std::size_t next = 0;    // how many of them it posted this step
  };
  // A staging buffer in flight: its values on the device, the event after its send or receive,
  // and (a send's) the encoded host values the copy reads.
  struct Message {
    void* device = nullptr;
    std::size_t values = 0;
    cudaEvent_t done = nullptr;
    std::vector<std::byte> host;
  };
  int rank_;
  std::map<int, Channel> channels_;  // by HopChannel::index(): those this rank is an end of
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t copied_ = nullptr;
  std::map<std::pair<int, int>, Message> posted_;  // (channel, micro-batch) -> its receive
  std::vector<Message> in_flight_;                 // the sends
  std::map<std::size_t, std::vector<void*>> spare_buffers_;  // by values
  std::vector<cudaEvent_t> spare_events_;
  std::int64_t bytes_sent_ = 0;

  // The channel, holding the executor to the channel's order: NCCL would pair a message out of
  // order with another micro-batch's.
  Channel& next_of(const HopChannel& hc, int mb, bool send) {
    const auto it = channels_.find(hc.index());
    SUITE_CHECK(it != channels_.end() && it->second.sends == send,
                "a hop goes on a channel this rank is that end of");
    Channel& c = it->second;
    SUITE_CHECK(c.next < c.order.size() && c.order[c.next] == mb,
                "a channel's hops are posted in the schedule's order at both ends");
    ++c.next;
    return c;
  }
  void* take_buffer(std::size_t values) {
    std::vector<void*>& spare = spare_buffers_[values];
    if (!spare.empty()) {
      void* b = spare.back();
      spare.pop_back();
      return b;
    }
    void* b = nullptr;
    SUITE_CUDA_OK(cudaMalloc(&b, values * dtype_size(kWire)));
    return b;
  }
  cudaEvent_t take_event() {
    if (!spare_events_.empty()) {
      cudaEvent_t e = spare_events_.back();
      spare_events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    SUITE_CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  // Once its send or receive and copy are done.
  void release(Message& m) {
    spare_buffers_[m.values].push_back(m.device);
    spare_events_.push_back(m.done);
    m.device = nullptr;
    m.done = nullptr;
  }
};

}  // namespace

std::unique_ptr<HopTransport> make_nccl_hops(const Schedule& schedule, Comm& pp) {
  return std::make_unique<NcclHops>(schedule, pp);
}

}  // namespace suite::pipeline

// One interface for every transport (MPI on host buffers, MPI on GPU buffers, NCCL), so a
// benchmark's algorithm is written once. Buffers are wherever Device::alloc put them.
// Collectives are stream-ordered on CUDA (NCCL) or complete on return (MPI); callers that
// time them synchronise through the Device.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/device/device.hpp"
#include "common/harness/wait_observer.hpp"
#include "kernels/core/dtype.hpp"

namespace suite {

enum class Transport { mpi, nccl };

constexpr const char* transport_name(Transport t) {
  return t == Transport::mpi ? "mpi" : "nccl";
}

// Payload this rank handed to the transport for other ranks, and got from them. See
// docs/RESULTS_SCHEMA.md "How bytes are counted".
struct ByteCounts {
  std::int64_t sent = 0;
  std::int64_t recv = 0;
};

class Comm {
 public:
  virtual ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual Transport transport() const = 0;
  // "host buffers", "cuda-aware", "host-staged" or "nccl", recorded in every results file.
  virtual std::string detail() const = 0;
  // Largest element count one call takes (MPI's counts are int). Cases check their sizes
  // against it up front, so an oversized message is a clear error, not an abort mid-sweep.
  virtual std::size_t max_count() const = 0;

  // Sum over ranks of `count` elements.
  virtual void all_reduce(const void* send, void* recv, std::size_t count, DType t) = 0;
  // The same started without waiting (a gradient bucket summed while the backward goes on):
  // send and recv must stay untouched until finish_all_reduces() has waited for every sum
  // started, in order. Counted as all_reduce counts, at the start. MPI: MPI_Iallreduce, moving
  // inside later MPI calls and progress(); a transport without one (and MPI where the buffers
  // are staged or placeholders) runs it blocking here, and says so in async_all_reduce().
  virtual void start_all_reduce(const void* send, void* recv, std::size_t count, DType t) {
    all_reduce(send, recv, count, t);
  }
  virtual void finish_all_reduces() {}
  // "nonblocking" where start_all_reduce of type t returns before the sum is done, else
  // "blocking (why)".
  virtual std::string async_all_reduce(DType) const { return "blocking (this transport)"; }
  // send holds size()*recv_count elements; rank r gets the sum of block r.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t) = 0;
  // recv gets every rank's send_count elements in rank order.
  virtual void all_gather(const void* send, void* recv, std::size_t send_count, DType t) = 0;
  // Block r of send (count_per_rank elements) goes to rank r; recv block r came from rank r.
  virtual void all_to_all(const void* send, void* recv, std::size_t count_per_rank, DType t) = 0;
  // Uneven all-to-all; counts and displacements in elements, one per rank; zeros are fine.
  virtual void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                            const std::vector<std::size_t>& send_displs, void* recv,
                            const std::vector<std::size_t>& recv_counts,
                            const std::vector<std::size_t>& recv_displs, DType t) = 0;
  // The same started without waiting (an MoE micro-batch's rows travel while another's
  // experts compute): the buffers stay untouched until finish_all_to_all_v(ticket) has waited
  // for it; every rank starts them in the same order. Counted as all_to_all_v counts, at the
  // start. MPI on host buffers: MPI_Ialltoallv, moving inside later MPI calls; NCCL: on the
  // transport's own stream, later work on the device's stream waiting for it at finish;
  // elsewhere (MPI on staged or device buffers) it runs blocking here and finish returns at once.
  virtual int start_all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                                 const std::vector<std::size_t>& send_displs, void* recv,
                                 const std::vector<std::size_t>& recv_counts,
                                 const std::vector<std::size_t>& recv_displs, DType t) {
    all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, t);
    return -1;
  }
  virtual void finish_all_to_all_v(int /*ticket*/) {}
  // Whether start_all_to_all_v returns before the exchange is done, and how (for the results).
  virtual bool nonblocking_all_to_all_v() const { return false; }
  virtual std::string all_to_all_v_overlap() const {
    return "blocking: one micro-batch after another";
  }
  // Ring step: starts sending each part's `count` elements to rank `to` and receiving as many
  // from rank `from` into its `recv` (parts may differ in type: the backward ring moves K/V in
  // the storage type beside dK/dV partial sums in the gradient type; posted in order on both
  // sides). `send` must have no pending writer on the device's stream (its producer has
  // finished); `recv` may still be read by work already queued there (the exchange waits for
  // that); finish_exchange() waits for every part (MPI: on the host; NCCL: the exchange runs
  // on the transport's own stream, ordered after the work already queued on the device's
  // stream, and finish makes later work on the device's stream wait for it). One exchange in
  // flight.
  struct ExchangePart {
    const void* send = nullptr;
    void* recv = nullptr;
    std::size_t count = 0;
    DType type = DType::fp32;
  };
  virtual void start_exchange(const std::vector<ExchangePart>& parts, int to, int from) = 0;
  void start_exchange(const void* send, int to, void* recv, int from, std::size_t count, DType t) {
    start_exchange(std::vector<ExchangePart>{{send, recv, count, t}}, to, from);
  }
  virtual void finish_exchange() = 0;
  // Lets an exchange in flight move while the caller computes: MPI progresses only inside MPI
  // calls, so the CPU ring calls this between attention tiles. No-op where the transport
  // progresses by itself (NCCL on its own stream).
  virtual void progress() {}
  // Finished exchanges since clear_exchange_log(), in order: seconds from start to completion
  // (MPI: wall clock until the completion was seen; NCCL: events on its stream) and whether
  // completion was seen inside progress(), i.e. while the caller was still computing. NCCL
  // waits for its events here: call it after a step, not between rounds.
  struct ExchangeTiming {
    double seconds = 0;
    bool completed_in_progress = false;
  };
  virtual std::vector<ExchangeTiming> exchange_log() = 0;
  virtual void clear_exchange_log() = 0;
  // How an exchange overlaps compute on this transport, recorded in results.
  virtual std::string overlap_mechanism() const = 0;
  virtual void barrier() = 0;
  // The job-wide rank of this group's rank r.
  int world_rank(int r) const { return world_ranks_[static_cast<std::size_t>(r)]; }

  // Point-to-point messages of any size to and from any ranks of this group, any number in
  // flight (ring attention's group-cast sends each K/V run only to the ranks whose queries see
  // it; common/transport/peer_messages.cpp). Host buffers only, whatever the transport: MPI on this
  // communicator (a caller holding device buffers stages them). Counted as sent or received
  // when posted. A message pairs with the peer's of the same tag, in posting order; tags from
  // kPeerTagBase up are the callers' own (the ring exchange uses lower ones).
  static constexpr int kPeerTagBase = 1000;
  MPI_Request post_send(const void* data, std::size_t elems, DType t, int to, int tag);
  MPI_Request post_receive(void* data, std::size_t elems, DType t, int from, int tag);
  // True once every request has completed (completed ones become MPI_REQUEST_NULL); lets them
  // move meanwhile, as progress() lets the ring exchange.
  bool test_messages(std::vector<MPI_Request>& requests);
  // Waits for every request: a blocking wait on rank `peer` of this group (-1: several).
  void wait_messages(std::vector<MPI_Request>& requests, int peer);

  // The MPI communicator of these ranks (a duplicate this object owns), for host-side
  // gathers such as checks; valid while the Comm lives.
  MPI_Comm mpi_comm() const { return comm_; }

  const ByteCounts& bytes() const { return bytes_; }
  void reset_bytes() { bytes_ = {}; }
  // The same count since the transport was made, never reset (a case's whole traffic).
  const ByteCounts& lifetime_bytes() const { return lifetime_; }

  // Told of every blocking wait of this transport on other ranks (nullptr: nobody); groups
  // made from a communicator inherit its observer (group_comm.hpp).
  void set_wait_observer(WaitObserver* o) { observer_ = o; }
  WaitObserver* wait_observer() const { return observer_; }

 protected:
  // Reports one blocking wait to the observer for its lifetime. peer: a rank of this
  // communicator, or -1 for "the others".
  class WaitScope {
   public:
    WaitScope(const Comm& c, const char* what, int peer = -1);
    ~WaitScope();
    WaitScope(const WaitScope&) = delete;
    WaitScope& operator=(const WaitScope&) = delete;

   private:
    WaitObserver* observer_;
  };

  Comm(MPI_Comm comm);
  void count(std::int64_t sent, std::int64_t recv) {
    bytes_.sent += sent;
    bytes_.recv += recv;
    lifetime_.sent += sent;
    lifetime_.recv += recv;
  }
  // Collectives where every rank sends and receives the same amount.
  void count_both(std::int64_t n) { count(n, n); }
  // Bytes per rank of the bandwidth-optimal all-reduce of n bytes: 2 (t-1)/t n.
  std::int64_t all_reduce_bytes(std::int64_t n) const { return 2 * (size_ - 1) * n / size_; }

  MPI_Comm comm_;  // a duplicate owned by this object
  int rank_ = 0, size_ = 1;

 private:
  ByteCounts bytes_, lifetime_;
  WaitObserver* observer_ = nullptr;
  std::vector<int> world_ranks_;  // of this communicator's ranks
};

// Lifetime bytes of several communicators summed (null ones skipped): the traffic of the
// groups of a device mesh along one axis (DeviceMesh::axis_bytes).
ByteCounts lifetime_bytes_of(const std::vector<const Comm*>& comms);

// The MPI transport on `device`'s buffers: direct on host memory, CUDA-aware when the MPI
// library supports it, else staged through pinned host memory.
std::unique_ptr<Comm> make_mpi_comm(Device& device, MPI_Comm comm);
// The NCCL transport (CUDA backend only). Throws UsageError when built without NCCL.
std::unique_ptr<Comm> make_nccl_comm(Device& device, MPI_Comm comm);
// "2.21.5" or "none".
std::string nccl_version();

}  // namespace suite

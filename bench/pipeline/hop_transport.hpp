// How a pipeline's hops travel between the ranks of the PP group, whatever carries them: each a
// micro-batch's rows on a channel (hop_channels.hpp), received into or sent from host rows.
// MPI (make_mpi_hops): nonblocking messages on the host rows in fp64 through the suite's Comm,
// tagged by stage and micro-batch. NCCL (make_nccl_hops, CUDA builds with NCCL): ncclSend and
// ncclRecv in fp32 from device staging buffers, one two-rank communicator and stream per
// channel, so messages match in issue order, which the schedule's channels keep.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/pipeline/hop_channels.hpp"
#include "bench/pipeline/stage.hpp"
#include "common/transport/comm.hpp"

namespace suite::pipeline {

class HopTransport {
 public:
  virtual ~HopTransport() = default;
  // Posts the receive of micro-batch mb's hop on channel c: `values` values from rank `from`.
  virtual void post_receive(const HopChannel& c, int mb, std::size_t values, int from) = 0;
  // Waits for the receive posted for (c, mb) and hands its rows over.
  virtual Rows wait_receive(const HopChannel& c, int mb, int from) = 0;
  // Sends mb's `values` rows on c to rank `to`; they travel while the rank computes on (rows
  // may be empty under modeled compute: a placeholder's, hop_buffer.hpp).
  virtual void post_send(const HopChannel& c, int mb, Rows rows, std::size_t values, int to) = 0;
  // Lets the sends in flight move and frees those that completed.
  virtual void test_sends() = 0;
  virtual void wait_sends() = 0;
  // Bytes this rank's sends put on the wire since reset_bytes().
  virtual std::int64_t bytes_sent() const = 0;
  virtual void reset_bytes() = 0;
};

// What carries a case's hops (for its results and prediction): the type its values travel in,
// and a line saying how.
DType hop_wire_type(Transport t);
std::string hop_detail(Transport t);

// The hops of `schedule` over the PP group `pp` (this rank's ops in order).
std::unique_ptr<HopTransport> make_mpi_hops(const Schedule& schedule, Comm& pp);
// Collective over pp: makes each channel's communicator. UsageError in a build without NCCL.
std::unique_ptr<HopTransport> make_nccl_hops(const Schedule& schedule, Comm& pp);
// By t: the harness's transport (NCCL, the CUDA backend's default, or MPI).
std::unique_ptr<HopTransport> make_hop_transport(Transport t, const Schedule& schedule, Comm& pp);

}  // namespace suite::pipeline

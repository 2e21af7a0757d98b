#include "bench/pipeline/hop_transport.hpp"

#include "common/harness/errors.hpp"

namespace suite::pipeline {

DType hop_wire_type(Transport t) {
  return t == Transport::nccl ? DType::fp32 : DType::fp64;
}

std::string hop_detail(Transport t) {
  return t == Transport::nccl
             ? "NCCL send/recv of fp32 device copies of the host rows, one communicator and "
               "stream per stage boundary and direction"
             : "MPI nonblocking messages of the host rows in fp64";
}

std::unique_ptr<HopTransport> make_hop_transport(Transport t, const Schedule& schedule, Comm& pp) {
  return t == Transport::nccl ? make_nccl_hops(schedule, pp) : make_mpi_hops(schedule, pp);
}

#if !defined(SUITE_HAVE_NCCL)
std::unique_ptr<HopTransport> make_nccl_hops(const Schedule&, Comm&) {
  throw UsageError(
      "--transport nccl: this build has no NCCL for pipeline's hops (rebuild where nvcc and NCCL "
      "are found, or use --transport mpi)");
}
#endif

}  // namespace suite::pipeline

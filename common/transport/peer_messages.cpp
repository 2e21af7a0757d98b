// Comm's point-to-point messages (comm.hpp): MPI's nonblocking send and receive on the group's
// communicator, on host buffers, counted when posted as the transports count theirs.
#include <algorithm>
#include <limits>
#include <vector>

#include "common/harness/errors.hpp"
#include "common/transport/comm.hpp"

namespace suite {
namespace {

// bf16 travels as 16-bit words (no reduction here, so no MPI type of its own is needed).
MPI_Datatype element_type(DType t) {
  return t == DType::fp64 ? MPI_DOUBLE : t == DType::fp32 ? MPI_FLOAT : MPI_UINT16_T;
}

int message_count(std::size_t elems) {
  SUITE_CHECK(elems <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
              "a message above 2^31-1 elements");
  return static_cast<int>(elems);
}

std::int64_t message_bytes(std::size_t elems, DType t) {
  return static_cast<std::int64_t>(elems * dtype_size(t));
}

}  // namespace

MPI_Request Comm::post_send(const void* data, std::size_t elems, DType t, int to, int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  SUITE_MPI_CHECK(MPI_Isend(data, message_count(elems), element_type(t), to, tag, comm_, &req));
  count(to == rank_ ? 0 : message_bytes(elems, t), 0);
  return req;
}

MPI_Request Comm::post_receive(void* data, std::size_t elems, DType t, int from, int tag) {
  MPI_Request req = MPI_REQUEST_NULL;
  SUITE_MPI_CHECK(MPI_Irecv(data, message_count(elems), element_type(t), from, tag, comm_, &req));
  count(0, from == rank_ ? 0 : message_bytes(elems, t));
  return req;
}

bool Comm::test_messages(std::vector<MPI_Request>& requests) {
  if (requests.empty()) return true;
  // Testsome, not Testall: each completed request is released at once, whatever the others do.
  int completed = 0;
  std::vector<int> indices(requests.size());
  SUITE_MPI_CHECK(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed,
                               indices.data(), MPI_STATUSES_IGNORE));
  return std::all_of(requests.begin(), requests.end(),
                     [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
}

void Comm::wait_messages(std::vector<MPI_Request>& requests, int peer) {
  if (requests.empty()) return;
  WaitScope wait(*this, "group-cast messages", peer);
  SUITE_MPI_CHECK(
      MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
}

}  // namespace suite

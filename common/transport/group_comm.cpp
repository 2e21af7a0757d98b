#include "common/transport/group_comm.hpp"

#include "common/harness/errors.hpp"

namespace suite {

std::unique_ptr<Comm> make_split_comm(Device& device, const Comm& parent, int color) {
  MPI_Comm group = MPI_COMM_NULL;
  SUITE_MPI_CHECK(MPI_Comm_split(parent.mpi_comm(), color, parent.rank(), &group));
  std::unique_ptr<Comm> comm = parent.transport() == Transport::nccl ? make_nccl_comm(device, group)
                                                                     : make_mpi_comm(device, group);
  SUITE_MPI_CHECK(MPI_Comm_free(&group));  // the Comm keeps its own duplicate
  comm->set_wait_observer(parent.wait_observer());
  return comm;
}

}  // namespace suite

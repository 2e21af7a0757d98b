#include "common/transport/group_comm.hpp"

#include <string>

#include "common/harness/errors.hpp"

namespace suite {

int resolve_group_size(int requested, int world_size, const char* flag) {
  if (requested == 0) return world_size;
  if (requested < 0 || world_size % requested != 0)
    throw UsageError(std::string(flag) + " " + std::to_string(requested) +
                     " must be a positive divisor of the job's " + std::to_string(world_size) +
                     " ranks (0 = all ranks)");
  return requested;
}

std::unique_ptr<Comm> make_group_comm(BenchContext& ctx, int group_size) {
  return make_split_comm(ctx, ctx.mpi.rank() / group_size);
}

std::unique_ptr<Comm> make_split_comm(BenchContext& ctx, int color) {
  return make_split_comm(ctx, MPI_COMM_WORLD, color);
}

std::unique_ptr<Comm> make_split_comm(BenchContext& ctx, MPI_Comm parent, int color) {
  int rank = 0;
  SUITE_MPI_CHECK(MPI_Comm_rank(parent, &rank));
  MPI_Comm group = MPI_COMM_NULL;
  SUITE_MPI_CHECK(MPI_Comm_split(parent, color, rank, &group));
  std::unique_ptr<Comm> comm = ctx.comm.transport() == Transport::nccl
                                   ? make_nccl_comm(ctx.device, group)
                                   : make_mpi_comm(ctx.device, group);
  SUITE_MPI_CHECK(MPI_Comm_free(&group));  // the Comm keeps its own duplicate
  comm->set_wait_observer(ctx.comm.wait_observer());
  return comm;
}

}  // namespace suite

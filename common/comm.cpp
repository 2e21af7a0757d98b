#include "common/comm.hpp"

#include "common/errors.hpp"

namespace suite {

Comm::Comm(MPI_Comm comm) {
  SUITE_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  SUITE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  SUITE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

Comm::~Comm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

}  // namespace suite

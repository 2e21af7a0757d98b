// main() of the test executables that run under mpirun: MPI set up around Google Test, only
// rank 0 printing (a multi-rank run reads as one), and every rank exiting with the worst
// rank's result, so a failure on any rank fails the run.
#include <gtest/gtest.h>
#include <mpi.h>

#include "common/transport/mpi_env.hpp"

int main(int argc, char** argv) {
  suite::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}

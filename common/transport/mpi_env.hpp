// The MPI process group: initialisation, who is where, and collective agreement on errors.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace suite {

// Owns MPI_Init_thread / MPI_Finalize. Thread support MULTIPLE is requested because the
// watchdog may abort from its own thread and the CPU ring path progresses transfers from one.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes on this node
  int local_size() const { return local_size_; }
  const std::string& hostname() const { return hostname_; }
  std::string library_version() const;
  // Whether MPI granted MPI_THREAD_MULTIPLE (the watchdog may then abort from its thread).
  bool thread_multiple() const { return thread_multiple_; }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool thread_multiple_ = false;
  std::string hostname_;
};

// Collective: every rank passes its own error (or nothing). If any rank failed, every rank
// returns the message of the lowest failing rank; otherwise nullopt. Lets one rank's bad
// state become a decision all ranks take together, instead of a hang.
std::optional<std::string> agree_on_error(const std::optional<std::string>& local_error,
                                          MPI_Comm comm = MPI_COMM_WORLD);

// Collective: gathers one string per rank to every rank.
std::vector<std::string> all_gather_strings(const std::string& mine,
                                            MPI_Comm comm = MPI_COMM_WORLD);
// Collective: one string per rank, indexed by rank, on `root`; empty on the other ranks (a
// list every rank kept would cost each rank the job's size: thousands of simulated ranks).
std::vector<std::string> gather_strings(const std::string& mine, int root = 0,
                                        MPI_Comm comm = MPI_COMM_WORLD);

// Collective max / sum of a double over the communicator.
double all_reduce_max(double v, MPI_Comm comm = MPI_COMM_WORLD);
// Element-wise max over the communicator of equal-length integer vectors (counts, bytes).
std::vector<std::int64_t> all_reduce_max(std::vector<std::int64_t> v,
                                         MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace suite

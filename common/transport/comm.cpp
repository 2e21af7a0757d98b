#include "common/transport/comm.hpp"

#include "common/harness/errors.hpp"

namespace suite {

Comm::Comm(MPI_Comm comm) {
  SUITE_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  SUITE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  SUITE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // World ranks of the members, so a wait names the rank a user sees in every message.
  MPI_Group mine, world;
  SUITE_MPI_CHECK(MPI_Comm_group(comm_, &mine));
  SUITE_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> local(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    local[static_cast<std::size_t>(r)] = r;
  world_ranks_.resize(local.size());
  SUITE_MPI_CHECK(MPI_Group_translate_ranks(mine, size_, local.data(), world, world_ranks_.data()));
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
}

Comm::WaitScope::WaitScope(const Comm& c, const char* what, int peer) : observer_(c.observer_) {
  if (!observer_) return;
  if (peer < 0 && c.size_ == 2) peer = 1 - c.rank_;  // "the others" is one rank
  observer_->begin_wait(what, peer >= 0 ? c.world_ranks_[static_cast<std::size_t>(peer)] : -1);
}

Comm::WaitScope::~WaitScope() {
  if (observer_) observer_->end_wait();
}

Comm::~Comm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

ByteCounts lifetime_bytes_of(const std::vector<const Comm*>& comms) {
  ByteCounts b;
  for (const Comm* c : comms)
    if (c) {
      b.sent += c->lifetime_bytes().sent;
      b.recv += c->lifetime_bytes().recv;
    }
  return b;
}

}  // namespace suite

// Process groups: a method's group (TP, CP, EP) is often a slice of the job (TP inside a node
// of 8 GPUs in a job of 16). Groups are consecutive ranks, all running the same case at once.
#pragma once

#include <memory>

#include "common/transport/comm.hpp"
#include "common/harness/context.hpp"

namespace suite {

// Group size from a flag: 0 means every rank of the job. Throws UsageError naming `flag` when
// the size does not divide the job's ranks.
int resolve_group_size(int requested, int world_size, const char* flag);

// This rank's group of `group_size` consecutive ranks, on the run's transport. Collective over
// the whole job (every rank must call it with the same size). With group_size equal to the
// world size the group is the whole job.
std::unique_ptr<Comm> make_group_comm(BenchContext& ctx, int group_size);

// This rank's group of all ranks that pass the same `color` (ordered by rank), on the run's
// transport, with ctx.comm's wait observer. Collective over the whole job.
std::unique_ptr<Comm> make_split_comm(BenchContext& ctx, int color);
// The same over the ranks of `parent` (collective over them; ordered by their rank there).
std::unique_ptr<Comm> make_split_comm(BenchContext& ctx, MPI_Comm parent, int color);

}  // namespace suite

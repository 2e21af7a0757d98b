// Per-rank figures gathered to rank 0 as the [rows, ranks] / [ranks, n] tables results hold, or
// reduced over the ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace suite {

// Equal-length per-rank vectors to rank 0 as a [ranks, n] row-major table (empty elsewhere).
std::vector<double> gather_rows(const std::vector<double>& mine, int ranks, int rank);
// The same as an [n, ranks] table (rows = iterations or rounds, columns = ranks).
std::vector<double> gather_columns(const std::vector<double>& mine, int ranks, int rank);
std::vector<std::int64_t> gather_int_columns(const std::vector<std::int64_t>& mine, int ranks,
                                             int rank);
std::vector<std::int64_t> gather_int(std::int64_t mine, int ranks, int rank);

// The largest of every rank's value, on every rank (a step's time: its slowest rank's).
double max_over_ranks(double mine);
// Per entry over the ranks of comm, in place: the smallest where least[i], else the largest
// (a group's compute piece takes its slowest rank, an exchange its last rank to arrive).
void extreme_over_ranks(std::vector<double>& values, const std::vector<bool>& least, MPI_Comm comm);

}  // namespace suite

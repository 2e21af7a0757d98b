#include "common/transport/rank_gather.hpp"

#include <mpi.h>

#include "common/harness/errors.hpp"

namespace suite {
namespace {

template <class T>
std::vector<T> gather_by_rank(const std::vector<T>& mine, MPI_Datatype type, int ranks, int rank) {
  std::vector<T> by_rank(rank == 0 ? mine.size() * ranks : 0);
  SUITE_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(mine.size()), type, by_rank.data(),
                             static_cast<int>(mine.size()), type, 0, MPI_COMM_WORLD));
  return by_rank;
}

template <class T>
std::vector<T> transpose_to_columns(const std::vector<T>& by_rank, std::size_t n, int ranks) {
  std::vector<T> table(by_rank.size());
  for (int r = 0; r < ranks; ++r)
    for (std::size_t i = 0; i < n; ++i)
      table[i * ranks + r] = by_rank[r * n + i];
  return table;
}

}  // namespace

std::vector<double> gather_rows(const std::vector<double>& mine, int ranks, int rank) {
  return gather_by_rank(mine, MPI_DOUBLE, ranks, rank);
}

std::vector<double> gather_columns(const std::vector<double>& mine, int ranks, int rank) {
  auto by_rank = gather_by_rank(mine, MPI_DOUBLE, ranks, rank);
  return rank == 0 ? transpose_to_columns(by_rank, mine.size(), ranks) : by_rank;
}

std::vector<std::int64_t> gather_int_columns(const std::vector<std::int64_t>& mine, int ranks,
                                             int rank) {
  auto by_rank = gather_by_rank(mine, MPI_INT64_T, ranks, rank);
  return rank == 0 ? transpose_to_columns(by_rank, mine.size(), ranks) : by_rank;
}

std::vector<std::int64_t> gather_int(std::int64_t mine, int ranks, int rank) {
  return gather_by_rank(std::vector<std::int64_t>{mine}, MPI_INT64_T, ranks, rank);
}

double max_over_ranks(double mine) {
  double out = mine;
  SUITE_MPI_CHECK(MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

void extreme_over_ranks(std::vector<double>& values, const std::vector<bool>& least,
                        MPI_Comm comm) {
  SUITE_CHECK(values.size() == least.size(), "one least flag per value");
  for (std::size_t i = 0; i < values.size(); ++i)  // the min as the max of the negated
    if (least[i]) values[i] = -values[i];
  SUITE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                MPI_DOUBLE, MPI_MAX, comm));
  for (std::size_t i = 0; i < values.size(); ++i)
    if (least[i]) values[i] = -values[i];
}

}  // namespace suite

#include "bench/ring_attention/global_order.hpp"

#include <mpi.h>

#include <algorithm>

#include "bench/ring_attention/attention_inputs.hpp"
#include "common/harness/errors.hpp"

namespace suite::ring {
namespace {

std::vector<double> all_gather_doubles(const std::vector<double>& mine) {
  int ranks = 0;
  SUITE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  std::vector<double> all(mine.size() * ranks);
  SUITE_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                                static_cast<int>(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD));
  return all;
}

}  // namespace

std::vector<double> slice_in_global_order(const std::vector<double>& rows,
                                          const std::vector<std::int64_t>& positions,
                                          std::int64_t width, int group_rank, int group_size) {
  int world_rank = 0;
  SUITE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  const auto c = static_cast<std::int64_t>(positions.size());
  const auto all_rows = all_gather_doubles(rows);
  const auto all_pos = all_gather_doubles(std::vector<double>(positions.begin(), positions.end()));
  const int first = world_rank - group_rank;  // world rank of the group's rank 0
  std::vector<double> out(static_cast<std::size_t>(c * width));
  for (int j = 0; j < group_size; ++j)
    for (std::int64_t i = 0; i < c; ++i) {
      const std::size_t src = static_cast<std::size_t>(first + j) * c + i;
      const std::int64_t t = static_cast<std::int64_t>(all_pos[src]) - group_rank * c;
      if (t < 0 || t >= c) continue;
      std::copy_n(all_rows.begin() + static_cast<std::ptrdiff_t>(src * width), width,
                  out.begin() + t * width);
    }
  return out;
}

std::vector<double> stored_input_slice(std::uint64_t seed, int which_tensor, int group_rank,
                                       std::int64_t tokens_per_rank, std::int64_t batch, int heads,
                                       int head_dim, DType t) {
  std::vector<std::int64_t> mine(static_cast<std::size_t>(tokens_per_rank));
  for (std::int64_t i = 0; i < tokens_per_rank; ++i)
    mine[static_cast<std::size_t>(i)] = group_rank * tokens_per_rank + i;
  return stored_attention_input(seed, static_cast<InputTensor>(which_tensor), mine, batch, heads,
                                head_dim, t);
}

}  // namespace suite::ring

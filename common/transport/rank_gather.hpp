// Per-rank figures gathered to rank 0 as the [rows, ranks] / [ranks, n] tables results hold.
#pragma once

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

}  // namespace suite

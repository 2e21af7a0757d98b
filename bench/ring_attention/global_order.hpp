// --save-tensors for sequence-parallel methods: each rank saves its share of its group's
// sequence in global token order, so the file's rows, read in rank order within a group, are
// the sequence from token 0 (whatever layout the method used).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/dtype.hpp"

namespace suite::ring {

// Collective over the whole job. `rows`: this rank's tokens (at `positions`), `width` values
// each; the group is `group_size` consecutive ranks, this rank being `group_rank` in it, and
// every rank holds tokens_per_rank = positions.size() of them. Returns the values of tokens
// [group_rank * tokens_per_rank, (group_rank + 1) * tokens_per_rank) of the group's sequence.
std::vector<double> slice_in_global_order(const std::vector<double>& rows,
                                          const std::vector<std::int64_t>& positions,
                                          std::int64_t width, int group_rank, int group_size);

// Q, K or V of that same slice as the run stored them (drawn by position, rounded to `t`).
std::vector<double> stored_input_slice(std::uint64_t seed, int which_tensor, int group_rank,
                                       std::int64_t tokens_per_rank, std::int64_t batch, int heads,
                                       int head_dim, DType t);

}  // namespace suite::ring

// Deterministic attention inputs keyed by global token position: any rank (or a reference)
// can draw any token's Q, K or V without communication, so sharded runs and the
// single-process reference see the very same values.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/core/dtype.hpp"

namespace suite::ring {

// d_o: the output gradient a training step feeds the backward (loss = sum(d_o * o)).
enum class InputTensor : std::uint64_t { q = 1, k = 2, v = 3, d_o = 4 };

// Values in [-1, 1) for the tokens at `positions`, laid out [tokens, batch, heads, head_dim].
std::vector<double> attention_input(std::uint64_t seed, InputTensor which,
                                    const std::vector<std::int64_t>& positions, std::int64_t batch,
                                    int heads, int head_dim);

// The same values as a run in element type `t` stores them (rounded), for references.
std::vector<double> stored_attention_input(std::uint64_t seed, InputTensor which,
                                           const std::vector<std::int64_t>& positions,
                                           std::int64_t batch, int heads, int head_dim, DType t);

}  // namespace suite::ring

// Host-side conversion between doubles and the element types, for filling inputs and reading
// results back in checks (bf16 rounds to nearest even, like the device).
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/core/dtype.hpp"

namespace suite {

std::vector<std::byte> encode(const std::vector<double>& values, DType t);
std::vector<double> decode(const void* data, std::size_t count, DType t);

}  // namespace suite

#include "bench/ring_attention/attention_inputs.hpp"

#include "common/device/typed_host.hpp"
#include "kernels/core/counter_rng.hpp"

namespace suite::ring {

std::vector<double> attention_input(std::uint64_t seed, InputTensor which,
                                    const std::vector<std::int64_t>& positions, std::int64_t batch,
                                    int heads, int head_dim) {
  const std::int64_t row = batch * heads * head_dim;
  std::vector<double> out(positions.size() * static_cast<std::size_t>(row));
  const std::uint64_t stream = kernels::mix64(seed ^ (static_cast<std::uint64_t>(which) << 56));
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (std::int64_t j = 0; j < row; ++j) {
      const std::uint64_t bits = kernels::counter_hash(
          stream, static_cast<std::uint64_t>(positions[t]), static_cast<std::uint64_t>(j));
      // 53 random bits -> [0, 1) -> [-1, 1)
      out[t * row + j] = 2.0 * static_cast<double>(bits >> 11) * 0x1.0p-53 - 1.0;
    }
  return out;
}

std::vector<double> stored_attention_input(std::uint64_t seed, InputTensor which,
                                           const std::vector<std::int64_t>& positions,
                                           std::int64_t batch, int heads, int head_dim, DType t) {
  const auto v = attention_input(seed, which, positions, batch, heads, head_dim);
  const auto bytes = encode(v, t);
  return decode(bytes.data(), v.size(), t);
}

}  // namespace suite::ring

#include "common/transport/exact_pattern.hpp"

#include "kernels/core/counter_rng.hpp"

namespace suite {

namespace {
constexpr int kMaxContributors = 85;  // 85 x 3 = 255 <= 256
// Prime, so a block shifted by a power-of-two number of elements lands on other values.
constexpr std::size_t kPeriod = 4093;
}  // namespace

ExactSumPattern::ExactSumPattern(int ranks)
    : ranks_(ranks), stride_((ranks + kMaxContributors - 1) / kMaxContributors) {
  sums_.assign(kPeriod, 0.0);
  for (std::size_t i = 0; i < kPeriod; ++i)
    for (int r = 0; r < ranks_; ++r)
      sums_[i] += value(r, i);
}

double ExactSumPattern::value(int rank, std::size_t i) const {
  const std::size_t r = static_cast<std::size_t>(rank), j = i % kPeriod;
  if ((r + j) % static_cast<std::size_t>(stride_) != 0) return 0;
  return static_cast<double>(kernels::mix64(r * kPeriod + j) >> 62);  // top two bits: 0..3
}

}  // namespace suite

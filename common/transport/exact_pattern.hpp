// Inputs for collective checks whose sums over ranks are exact in bf16, fp32 and fp64, so a
// check can demand equality and any wrong element fails it.
#pragma once

#include <cstddef>
#include <vector>

namespace suite {

// Values are small non-negative integers (0..3) drawn from a hash of (rank, element), so ranks
// differ and the sums vary along the buffer (a misplaced block does not match). At most 85
// ranks contribute to any one element, so no partial sum of any reduction order exceeds 255:
// bf16 holds every integer up to 256 exactly. The pattern repeats with a prime period, so the
// expected sums are a small table however large the buffer.
class ExactSumPattern {
 public:
  explicit ExactSumPattern(int ranks);
  double value(int rank, std::size_t i) const;
  // The sum over all ranks of element i (from a table of one period of the pattern).
  double sum(std::size_t i) const { return sums_[i % sums_.size()]; }

 private:
  int ranks_;
  int stride_;  // rank r contributes to element i iff (r + i % period) % stride_ == 0
  std::vector<double> sums_;
};

}  // namespace suite

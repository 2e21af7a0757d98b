// Summary statistics of step times.
#pragma once

#include <vector>

namespace suite {

struct Summary {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0, mean = 0;
};

// Linear-interpolated percentile (q in [0, 1]) of unsorted values; 0 for an empty input.
double percentile(std::vector<double> values, double q);
Summary summarize(const std::vector<double>& values);

}  // namespace suite

// Why a ring pass reaches the efficiency it does against the ideal (one rank's attention of the
// whole sequence, over N_c): three factors whose product is ideal / N_c / overlapped exactly.
//   balance:   mean over busiest of the ranks' visible pairs (counted from the layout);
//   pair_rate: the busiest rank's pairs per second in the compute-only step over the ideal's
//              (measured: the kernel on the layout's blocks, with the merges, against one call
//              over whole documents);
//   exchange:  the compute-only step over the overlapped one (measured: what the ring's
//              transfers add to it; the backward's overlapped time also holds any wait for
//              the forward's busiest rank).
#pragma once

#include <cmath>

namespace suite::ring {

struct EfficiencyFactors {
  double balance = 0, pair_rate = 0, exchange = 0;
  double efficiency() const { return balance * pair_rate * exchange; }
};

// NaN factors where a rank had no work or a time is not positive.
inline EfficiencyFactors efficiency_factors(double mean_pairs, double max_pairs, int n_c,
                                            double ideal_s, double t_comp, double t_over) {
  if (!(max_pairs > 0 && ideal_s > 0 && t_comp > 0 && t_over > 0)) return {NAN, NAN, NAN};
  const double ideal_pairs_per_s = n_c * mean_pairs / ideal_s;  // the ideal computes every pair
  return {mean_pairs / max_pairs, max_pairs / t_comp / ideal_pairs_per_s, t_comp / t_over};
}

}  // namespace suite::ring

// The ideal a context-parallel step is read against (ring-flash-attention's "efficiency"):
// one rank's full attention over the whole sequence of s = c N_c tokens (the case's heads,
// batch and mask, the same kernel), timed in the same run; ideal / N_c over the step. It runs
// on every rank at once, under the same contention as the case's own compute.
#pragma once

#include <string>

#include "bench/ring_attention/ring_config.hpp"
#include "common/device/device.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

constexpr int kIdealIterations = 3;  // timed calls of the ideal (the median is kept)

struct IdealTimes {
  bool skipped = false;
  std::string why_skipped;
  double fwd_s = 0, bwd_s = 0;  // medians over iterations of the max over ranks
};

// Skipped (on every rank alike) when one full attention would take longer than a few seconds
// at `flops_per_s` or would not fit in memory. `backward`: time the backward too.
IdealTimes measure_ideal(const RingConfig& cfg, Device& device, kernels::AttentionEngine& engine,
                         double flops_per_s, bool backward, int iterations);

}  // namespace suite::ring

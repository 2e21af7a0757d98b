// A hop's rows while they wait: posted for a receive, in flight after a send, or kept on the
// rank for a later op. Under modeled compute (SMPI build, --sim-flops) a hop of at least
// sim::kPlaceholderMinBytes is a placeholder of its size instead (common/sim/sim.hpp): the
// simulated wire still carries every byte, but the rank holds none, so thousands of simulated
// ranks with their hops in flight fit one host. Its rows come out empty (Stage: an empty
// micro-batch is a placeholder's), so no rank fills a copy of values no one reads.
#pragma once

#include <cstddef>

#include "bench/pipeline/stage.hpp"
#include "common/device/device.hpp"

namespace suite::pipeline {

class HopBuffer {
 public:
  HopBuffer() = default;
  // Room for `values` to arrive in.
  static HopBuffer receiving(std::size_t values);
  // The rows to send or keep, `values` of them (rows may be empty: a placeholder's).
  static HopBuffer holding(Rows rows, std::size_t values);

  // Where a message reads or writes the hop's values.
  void* data();
  std::size_t values() const { return values_; }
  // The rows, handed over once (empty for a placeholder).
  Rows take();

 private:
  Rows rows_;
  Buffer placeholder_;
  std::size_t values_ = 0;
};

}  // namespace suite::pipeline

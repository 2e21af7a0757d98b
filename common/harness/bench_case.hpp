// What a benchmark provides per case; the harness (harness.hpp) runs it in lockstep on every
// rank, times it, checks it and writes it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/harness/phase_timer.hpp"
#include "common/harness/stats.hpp"
#include "common/results/results.hpp"
#include "common/transport/comm.hpp"

namespace suite {

struct CheckOutcome {
  bool passed = true;
  double max_abs_err = 0;
  std::string detail;    // what went wrong (or why it was skipped), on the rank that saw it
  bool skipped = false;  // could not run (e.g. no memory for the reference): neither pass nor fail
};

// Measured facts the harness hands to report(): the step-time summary (max over ranks per
// iteration) and this rank's bytes per iteration.
struct Measurement {
  Summary step;
  int iterations = 0;
  double bytes_sent_per_iter = 0;
  double bytes_recv_per_iter = 0;
  // Per phase: median over iterations of the max over ranks.
  std::vector<std::pair<std::string, double>> phase_median_s;
};

// Small per-rank arrays the case wants saved (--save-tensors), gathered to rank 0 as [ranks, n].
struct SavedTensor {
  std::string name;
  std::vector<double> values;
};

class BenchCase {
 public:
  virtual ~BenchCase() = default;
  // Allocates and fills; not timed. May throw UsageError / std::exception: the harness agrees
  // on it across ranks and skips the case on all of them.
  virtual void setup() {}
  // One timed iteration; time its parts with phases.time("name", ...).
  virtual void step(PhaseTimer& phases) = 0;
  // Verifies the result of the last step on this rank.
  virtual CheckOutcome check() { return {}; }
  // Adds measured figures and their pred_* predictions to rec.attrs (and any method datasets
  // to rec's tables); runs on every rank (may be collective); rank 0's record is written.
  virtual void report(const Measurement&, CaseRecord& rec) { (void)rec; }
  // Inputs/outputs of this rank for --save-tensors (empty when the case is too large).
  virtual std::vector<SavedTensor> tensors() { return {}; }
};

struct CaseSpec {
  std::string name;   // unique, readable, built from the parameters
  Attributes params;  // typed parameters
  std::function<std::unique_ptr<BenchCase>()> make;
  // Figures printed as Google Benchmark counters on the console (must be numeric attrs).
  std::vector<std::string> console_counters;
};

}  // namespace suite

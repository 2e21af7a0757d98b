// --moe-overlap two-batch (METHODS.md section 4, "Hiding the all-to-all behind another
// micro-batch", for the whole block): the rank's b sequences cut into two micro-batches of b/2,
// each the block's layer on its own rows (ComposedBlock builds both; with CP each its own
// attention over the CP group on its b/2 sequences, the rows a rank holds those of the block
// without two-batch), whose MoE parts are the two micro-batches of one MoeLayer (moe's
// MicrobatchPipeline: its nonblocking exchanges and its pieces). The schedule nests the second
// micro-batch inside the first's MoE part:
//   forward:  micro-batch 0 routes and starts its dispatch, then micro-batch 1's layer runs up
//             to its MoE part (LayerNorm, QKV, attention with its CP exchanges, output
//             projection with TP's collectives, residual, LayerNorm, its route) while the
//             dispatch travels; then 0's experts beside 1's dispatch, 1's experts beside 0's
//             combine, and 1's combine beside 0's gate-weighted sum;
//   backward: 0's output-gradient exchange beside 1's residual backward (small), then each
//             micro-batch's expert backward beside the other's exchange, and 1's input-gradient
//             exchange beside 0's router backward; the attention backward of both, CP exchanges
//             included, runs with no all-to-all in flight (micro-batch 1's needs its MoE input
//             gradient first, and 0's comes after every exchange): the backward hides only part
//             of its all-to-all.
// With a capacity factor each micro-batch's capacity is its share.
#pragma once

#include <functional>
#include <vector>

#include "bench/mesh/moe_ffn.hpp"
#include "bench/moe/moe_microbatch.hpp"
#include "bench/sp_tp/layer_parts.hpp"
#include "common/harness/run_clock.hpp"

namespace suite::mesh {

// A step's all-to-all A and compute X (the block's own between the exchanges included), the
// group's (compute: the slowest rank's; exchanges: the last-arriving rank's), and the critical
// path of the schedule on those pieces.
struct TwoBatchProfile {
  double a2a_s = 0, compute_s = 0, pred_step_s = 0;
};

class TwoBatchSchedule {
 public:
  explicit TwoBatchSchedule(MoeFfn& moe, Device& device);
  ~TwoBatchSchedule();
  TwoBatchSchedule(const TwoBatchSchedule&) = delete;
  TwoBatchSchedule& operator=(const TwoBatchSchedule&) = delete;

  // The MoE part of micro-batch i's layer.
  sp_tp::FfnPart& part(int i);
  // Micro-batch 1's layer pass (forward, backward), run inside micro-batch 0's MoE part.
  void set_second(std::function<void(PhaseTimer&)> forward,
                  std::function<void(PhaseTimer&)> backward);
  // Eagerly: every exchange waited for as soon as it starts, and the step's pieces recorded in
  // order until profile_end, which returns the group's profile. Collective.
  void profile_begin();
  TwoBatchProfile profile_end();

 private:
  class Part;
  void forward_first(PhaseTimer& phases);
  void forward_second(PhaseTimer& phases);
  void backward_first(PhaseTimer& phases);
  void backward_second(PhaseTimer& phases);
  void compute(PhaseTimer& phases, int i, moe::Work w);
  void start(PhaseTimer& phases, int i, moe::Exchange x);
  void finish(PhaseTimer& phases, int i, moe::Exchange x);
  // Eager: the block's compute since the last piece, as a piece of its own; then the clock.
  void close_gap();
  void record(moe::SchedulePiece::Kind kind, std::string key, RunClock::time_point since);

  MoeFfn& moe_;
  Device& device_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::function<void(PhaseTimer&)> second_forward_, second_backward_;
  bool eager_ = false;
  std::vector<moe::SchedulePiece> trace_;
  RunClock::time_point mark_;
};

}  // namespace suite::mesh

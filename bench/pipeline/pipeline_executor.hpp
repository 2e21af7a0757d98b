// Runs one rank's ops of a pipeline schedule, whatever the generator yields: each F receives
// its micro-batch's activation from the stage before and sends its output to the stage after,
// each B (or BW) receives the output gradient and sends the input gradient back, on the channel
// of its stage boundary and direction (hop_channels.hpp) through a HopTransport (MPI or NCCL:
// the receives of the next ops posted ahead, the sends left in flight while the rank computes
// on). A hop between two chunks of one rank (zb-v's turn) stays in memory. Records each op's
// start and end.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "bench/pipeline/hop_buffer.hpp"
#include "bench/pipeline/hop_transport.hpp"
#include "bench/pipeline/stage.hpp"
#include "common/formulas/pipeline_schedule.hpp"

namespace suite::pipeline {

// The layers of each stage: the first L mod S stages of S hold one more.
int stage_first_layer(int stage, int stages, int layers);
int stage_layer_count(int stage, int stages, int layers);

struct OpSpan {
  Op op;
  double start = 0, end = 0;  // seconds from the step's start on this rank's clock
};

// Told around the ops of a step (the DP sums, dp_sums.hpp), outside their timed spans.
class OpHooks {
 public:
  virtual ~OpHooks() = default;
  // After the chunks' begin_step, each chunk of this rank in order.
  virtual void begin_step(const std::vector<Stage*>& chunks) = 0;
  // first_forward: the op is its chunk's first F of the step.
  virtual void before(const Op& op, bool first_forward) = 0;
  // last_weight_op: the op is its chunk's last W (or BW) of the step.
  virtual void after(const Op& op, bool last_weight_op) = 0;
};

class PipelineExecutor {
 public:
  // rank: this rank's in the PP group (it holds stage_of(rank, c) for each chunk c); hops: what
  // carries the hops over that group; make_stage: the layers of each chunk, made on the first
  // step and kept. drop_microbatch >= 0 leaves that micro-batch's weight gradients out of the
  // first stage's sums (a test hook the correctness check must catch). hooks (may be null) are
  // told around each op.
  PipelineExecutor(const Schedule& schedule, StageFactory make_stage, int layers, int rank,
                   HopTransport& hops, int drop_microbatch = -1, OpHooks* hooks = nullptr);

  // One training step: every op of this rank, from fresh gradients.
  void run_step();

  const std::vector<OpSpan>& timeline() const { return timeline_; }
  const Stage& chunk(int c) const { return *chunks_[c]; }
  Stage& chunk(int c) { return *chunks_[c]; }
  // Sum over micro-batches of 0.5 |y|^2 at the last stage (on the rank holding it; 0 elsewhere).
  double loss() const { return loss_; }
  // The first stage's input gradient per micro-batch (on the rank holding it), for the check:
  // none under modeled compute, which skips it.
  const std::map<int, Rows>& input_grads() const { return input_grads_; }
  // Messages this rank sent in the last step.
  int sends() const { return sends_; }
  // The most micro-batch chunks whose activations the rank held at once in the last step, and
  // their bytes (the stage layers' saved tensors).
  int peak_held() const { return peak_held_; }
  std::int64_t peak_activation_bytes() const { return peak_bytes_; }

 private:
  const Schedule& schedule_;
  StageFactory make_stage_;
  int layers_;
  HopTransport& hops_;
  int rank_;
  int drop_;
  OpHooks* hooks_;
  std::vector<int> first_forward_, last_weight_op_;  // by chunk: the op's index on this rank
  std::vector<std::unique_ptr<Stage>> chunks_;
  std::vector<OpSpan> timeline_;
  double loss_ = 0;
  std::map<int, Rows> input_grads_;
  int sends_ = 0;
  int peak_held_ = 0;
  std::int64_t peak_bytes_ = 0;
  std::set<int> posted_;  // the ops (by index) whose receive is posted this step
  std::map<std::pair<int, int>, HopBuffer> local_;  // (channel, mb): a hop within the rank
  std::map<int, HopBuffer> loss_grads_;             // mb: the last stage's, kept for its backward

  void post_receive(int index);
  Rows take_input(int index, const HopChannel& c);
  void send(const Op& op, const HopChannel& c, Rows data);
  void run_op(int index);
  void find_hooked_ops();
};

}  // namespace suite::pipeline

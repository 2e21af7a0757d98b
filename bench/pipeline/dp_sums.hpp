// The DP axis of the pipeline (METHODS.md sections 6 and 7): the PP groups beyond the first are
// data-parallel replicas, and each stage's weight gradients are summed over the DP group (the
// ranks of equal pipeline rank) once that stage's last W (or BW) of the step is done and the
// chunk has completed its own sums (finish_step: the block's over its CP group), under a
// --dp-shard mode (common/formulas/dp_shard.hpp): none all-reduces them and every rank steps the
// whole; optimizer reduce-scatters them, steps its shard and all-gathers the parameters; grads
// keeps the parameters sharded between steps and all-gathers them before the chunk's first
// forward; full also reshards them after every forward and backward and gathers them again
// before the next. The optimizer is plain SGD (w -= lr g). Every step starts from the model's
// initial weights (restored at its start), so each timed step does the same work and the check
// knows the update. A chunk's tensors are packed into one flat buffer, padded to a multiple of
// the DP degree; weights not held are NaN, so a missing gather shows in the check.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/pipeline/pipeline_executor.hpp"
#include "common/formulas/dp_shard.hpp"
#include "common/transport/comm.hpp"

namespace suite::pipeline {

class DataParallelSums final : public OpHooks {
 public:
  static constexpr double kLearningRate = 0.1;

  DataParallelSums(model::DpShard mode, Comm& dp) : mode_(mode), dp_(dp) {}

  void begin_step(const std::vector<Stage*>& chunks) override;
  void before(const Op& op, bool first_forward) override;
  void after(const Op& op, bool last_weight_op) override;

  // Bytes this rank sent in the last step, by collective.
  struct Sent {
    double all_reduce = 0, reduce_scatter = 0, all_gather = 0;
  };
  const Sent& sent() const { return sent_; }
  // Seconds of the last step in the sums (the collectives, the SGD step and optimizer's gather
  // after it) and in the gathers before forwards and backwards (grads, full).
  double sum_seconds() const { return sum_s_; }
  double gather_seconds() const { return gather_s_; }
  // The parameters (elements) of this rank's chunks, unpadded, and of its largest layer.
  std::int64_t params() const;
  std::int64_t layer_params() const;

  // After the step, chunk c's shard on this rank: the summed gradients and the updated
  // parameters (under none, this rank's slice of the whole).
  const Rows& grad_shard(int c) const { return chunks_[c].grad_shard; }
  const Rows& param_shard(int c) const { return chunks_[c].param_shard; }
  // The same slice of tensors laid out as chunk c's (a reference's), values or gradients.
  Rows shard_of(int c, const std::vector<ParamTensor>& tensors, bool grads) const;

 private:
  struct Chunk {
    Stage* stage = nullptr;
    std::vector<ParamTensor> tensors;
    std::size_t shard = 0;  // elements per rank: the padded total / n
    Rows initial;           // the parameters at the step's start, packed whole
    Rows param_shard, grad_shard;
  };
  model::DpShard mode_;
  Comm& dp_;
  std::vector<Chunk> chunks_;
  Sent sent_;
  double sum_s_ = 0, gather_s_ = 0;

  bool sharded() const;
  Rows slice(const Chunk& c, const Rows& whole) const;
  void gather(Chunk& c);
  void release(Chunk& c);
  void sum(Chunk& c);
};

}  // namespace suite::pipeline

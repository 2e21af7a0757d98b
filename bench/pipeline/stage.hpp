// What the executor runs as one chunk of a pipeline stage: consecutive layers of the model with
// any number of micro-batches in flight, on this rank's rows of each micro-batch (all of them,
// or its TP and CP shard), fed and read on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace suite::pipeline {

// A micro-batch's activation or gradient on this rank: [rows, hidden], row-major. Under modeled
// compute a hop of placeholder size comes and goes empty (hop_buffer.hpp): its values are
// zeros no one reads, so a stage takes an empty micro-batch as one of hop_values() zeros.
using Rows = std::vector<double>;

// One weight tensor of a chunk on this rank, and its gradient accumulator.
struct ParamTensor {
  double* value = nullptr;
  double* grad = nullptr;
  std::size_t elems = 0;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual int first_layer() const = 0;
  virtual int count() const = 0;
  // Values a hop carries: this rank's rows x hidden.
  virtual std::size_t hop_values() const = 0;
  // The micro-batch's input to the model's first layer.
  virtual Rows input(int microbatch) const = 0;
  virtual Rows forward(int microbatch, const Rows& input) = 0;
  // B and W apart (the zero-bubble schedules); a stage whose backward does not split runs
  // backward() only, under a fused schedule (fuse_backward).
  virtual Rows input_grad(int microbatch, const Rows& grad_output) = 0;
  // Adds the micro-batch's weight gradients (unless !accumulate) and frees its activations.
  virtual void weight_grad(int microbatch, bool accumulate) = 0;
  // The whole backward (BW): B then W.
  virtual Rows backward(int microbatch, const Rows& grad_output, bool accumulate) {
    Rows dx = input_grad(microbatch, grad_output);
    weight_grad(microbatch, accumulate);
    return dx;
  }
  // Around a step: fresh sums; after this rank's last op, the sums completed.
  virtual void begin_step() = 0;
  virtual void finish_step() {}
  // The micro-batches whose activations are held now, and the bytes one of them holds.
  virtual int held() const = 0;
  virtual std::int64_t bytes_per_microbatch() const = 0;
  // The weights the DP gradient sums cover (none: the stage has none built).
  virtual std::vector<ParamTensor> params() { return {}; }
};

// Makes the chunk holding layers first_layer .. first_layer + count - 1.
using StageFactory = std::function<std::unique_ptr<Stage>(int first_layer, int count)>;

}  // namespace suite::pipeline

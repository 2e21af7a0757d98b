// The layers of one pipeline chunk: dense residual MLP blocks y = x + tanh(x W1) W2 (the
// transformer's MLP half, the part whose weight-gradient GEMMs a zero-bubble schedule defers),
// in fp64 on the host. Each micro-batch's activations are kept from its forward until its
// weight gradients, so any number of micro-batches can be in flight, and the backward runs as
// one op (BW) or split into the input gradient (B) and the weight gradients (W).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "bench/pipeline/stage.hpp"

namespace suite::pipeline {

struct LayerShape {
  std::int64_t rows = 1;    // tokens of one micro-batch: b_mb s
  std::int64_t hidden = 1;  // h
  std::int64_t ffn = 4;     // d_ff
};

// The micro-batch's input to the first layer, the same on every rank.
Rows pipeline_input(const LayerShape& shape, int microbatch);

class StageLayers final : public Stage {
 public:
  // Layers first_layer .. first_layer + count - 1 of the model, their weights set from their
  // global index (so any split of the model holds the same weights). Micro-batch mb's input is
  // the model's input first_input + mb (a DP replica's own micro-batches).
  StageLayers(const LayerShape& shape, int first_layer, int count, int first_input = 0);

  Rows input(int microbatch) const override {
    return pipeline_input(shape_, first_input_ + microbatch);
  }
  std::size_t hop_values() const override {
    return static_cast<std::size_t>(shape_.rows * shape_.hidden);
  }
  Rows forward(int microbatch, const Rows& input) override;
  // The input gradient from the output gradient; keeps what the weight gradients need.
  Rows input_grad(int microbatch, const Rows& grad_output) override;
  void weight_grad(int microbatch, bool accumulate = true) override;
  void begin_step() override;

  int first_layer() const override { return first_; }
  int count() const override { return static_cast<int>(w1_.size()); }
  // Summed over the micro-batches run: [count][h f] and [count][f h].
  const std::vector<Rows>& grad_w1() const { return dw1_; }
  const std::vector<Rows>& grad_w2() const { return dw2_; }
  // The micro-batches whose activations are held now, and the most held at once.
  int held() const override { return static_cast<int>(saved_.size()); }
  std::int64_t bytes_per_microbatch() const override;
  // W1 and W2 of each layer in turn.
  std::vector<ParamTensor> params() override;

 private:
  struct Saved {
    std::vector<Rows> x, a, dy, g;  // per layer: input, tanh, output gradient, pre-tanh gradient
  };
  LayerShape shape_;
  int first_, first_input_;
  std::vector<Rows> w1_, w2_, dw1_, dw2_;
  std::map<int, Saved> saved_;
};

}  // namespace suite::pipeline

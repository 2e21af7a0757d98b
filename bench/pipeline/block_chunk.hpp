// A pipeline chunk of mesh's composed block (bench/mesh/block_stage.hpp) behind the executor's
// Stage: the hop carries this rank's TP and CP shard of the micro-batch (s/C b/T rows of h), and
// its weights (this rank's TP slices, replicated over CP and DP) are what the DP sums cover.
#pragma once

#include <memory>

#include "bench/mesh/block_stage.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "bench/pipeline/stage.hpp"

namespace suite::pipeline {

// The block a case's stages run: its sizes, T and C, its dtype, forward and backward.
mesh::MeshConfig block_config(const PipelineConfig& cfg);

class BlockChunk final : public Stage {
 public:
  // Micro-batch mb's input is the model's input first_input + mb (a DP replica's own).
  BlockChunk(const mesh::MeshConfig& cfg, BenchContext& ctx, Comm& tp, DeviceMesh* mesh,
             int first_layer, int count, int first_input = 0)
      : block_(cfg, ctx, tp, mesh, first_layer, count), hidden_(cfg.h), first_input_(first_input) {}

  int first_layer() const override { return block_.first_layer(); }
  int count() const override { return block_.count(); }
  std::size_t hop_values() const override {
    return block_.global_rows().size() * static_cast<std::size_t>(hidden_);
  }
  Rows input(int mb) const override { return block_.input(first_input_ + mb); }
  Rows forward(int mb, const Rows& x) override { return block_.forward(mb, x); }
  Rows input_grad(int, const Rows&) override;
  void weight_grad(int, bool) override;
  Rows backward(int mb, const Rows& dy, bool accumulate) override {
    return block_.backward(mb, dy, accumulate);
  }
  void begin_step() override {
    block_.begin_step();
    finished_ = false;
  }
  // Once per step: the DP sums complete it after the chunk's last backward, before the
  // executor's call at the step's end.
  void finish_step() override;
  // Every layer's slices in turn (ln1_gamma .. w_fc2), values and gradients in place (the CPU
  // backend's device memory is the host's).
  std::vector<ParamTensor> params() override;
  int held() const override { return block_.held(); }
  std::int64_t bytes_per_microbatch() const override { return block_.bytes_per_microbatch(); }

  mesh::BlockStage& block() { return block_; }

 private:
  mesh::BlockStage block_;
  std::int64_t hidden_;
  int first_input_;
  bool finished_ = false;
};

}  // namespace suite::pipeline

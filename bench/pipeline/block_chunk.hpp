// A pipeline chunk of mesh's composed block (bench/mesh/block_stage.hpp) behind the executor's
// Stage: the hop carries this rank's TP and CP shard of the micro-batch (s/C b/T rows of h).
#pragma once

#include <memory>

#include "bench/mesh/block_stage.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "bench/pipeline/stage.hpp"

namespace suite::pipeline {

// The block a case's stages run: its sizes, T and C, fp64, forward and backward.
mesh::MeshConfig block_config(const PipelineConfig& cfg);

class BlockChunk final : public Stage {
 public:
  BlockChunk(const mesh::MeshConfig& cfg, BenchContext& ctx, Comm& tp, DeviceMesh* mesh,
             int first_layer, int count)
      : block_(cfg, ctx, tp, mesh, first_layer, count), hidden_(cfg.h) {}

  int first_layer() const override { return block_.first_layer(); }
  int count() const override { return block_.count(); }
  std::size_t hop_values() const override {
    return block_.global_rows().size() * static_cast<std::size_t>(hidden_);
  }
  Rows input(int mb) const override { return block_.input(mb); }
  Rows forward(int mb, const Rows& x) override { return block_.forward(mb, x); }
  Rows input_grad(int, const Rows&) override;
  void weight_grad(int, bool) override;
  Rows backward(int mb, const Rows& dy, bool accumulate) override {
    return block_.backward(mb, dy, accumulate);
  }
  void begin_step() override { block_.begin_step(); }
  void finish_step() override { block_.finish_step(); }
  int held() const override { return block_.held(); }
  std::int64_t bytes_per_microbatch() const override { return block_.bytes_per_microbatch(); }

  mesh::BlockStage& block() { return block_; }

 private:
  mesh::BlockStage block_;
  std::int64_t hidden_;
};

}  // namespace suite::pipeline

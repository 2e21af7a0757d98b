// Mesh's composed block as a pipeline stage: `count` consecutive layers of the model, each sp_tp's
// TP+SP layer over the stage's TP group with its attention over the stage's CP group (C > 1),
// each with its own weights drawn from its global layer index (so one rank running all L layers
// holds the same weights), and any number of micro-batches in flight: each micro-batch's
// activations in a slot of their own (sp_tp/layer_microbatches.hpp; the CP attention, which
// keeps its own, one instance per slot), its input and output gradient given per call, the
// weight gradients summed over the step's micro-batches. The backward runs whole: the layer's
// weight-gradient GEMMs are interleaved with its input-gradient ones, so it has no separate W.
// Dense MLP only (no experts).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "bench/mesh/cp_attention.hpp"
#include "bench/mesh/mesh_config.hpp"
#include "bench/sp_tp/layer_microbatches.hpp"
#include "common/harness/context.hpp"
#include "common/mesh/device_mesh.hpp"

namespace suite::mesh {

class BlockStage {
 public:
  // tp: the stage's TP group; mesh: where the CP group comes from (nullptr when C = 1). The
  // stage's rows are those of this rank's TP and CP coordinates in one micro-batch of b
  // sequences of s tokens.
  BlockStage(const MeshConfig& cfg, BenchContext& ctx, Comm& tp, DeviceMesh* mesh, int first_layer,
             int count);
  ~BlockStage();

  // The micro-batch's input to the model's first layer on this rank's rows. Rows in and out
  // are empty where the layers' activations are placeholders (modeled compute): none is read.
  std::vector<double> input(int mb) const;
  std::vector<double> forward(int mb, const std::vector<double>& x);
  // The whole backward of the micro-batch: its input gradient; its weight gradients join the
  // step's sums unless !accumulate.
  std::vector<double> backward(int mb, const std::vector<double>& dy, bool accumulate);
  void begin_step();
  // After the stage's last backward: the step's sums into each layer's gradient buffers, summed
  // over the CP group (each CP rank's are its own tokens').
  void finish_step();

  int first_layer() const { return first_; }
  int count() const { return static_cast<int>(layers_.size()); }
  sp_tp::TransformerLayer& layer(int l) { return *layers_[static_cast<std::size_t>(l)]->layer; }
  // The global row (position p, sequence g: p b + g) of each of this rank's rows.
  const std::vector<std::int64_t>& global_rows() const { return global_rows_; }
  int held() const { return static_cast<int>(slot_of_.size()); }
  // Bytes one micro-batch in flight holds on this rank: the layers' ledgers and, with CP, the
  // attention's buffers.
  std::int64_t bytes_per_microbatch() const;

 private:
  class SlotAttention;
  struct Layer {
    std::unique_ptr<SlotAttention> attention;
    std::unique_ptr<sp_tp::TransformerLayer> layer;
    std::unique_ptr<sp_tp::LayerMicrobatches> microbatches;
  };
  MeshConfig cfg_;
  BenchContext& ctx_;
  DeviceMesh* mesh_;
  int first_;
  std::unique_ptr<sp_tp::LayerOps> ops_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::int64_t> global_rows_;
  std::map<int, int> slot_of_;  // micro-batch in flight -> its slot
  std::vector<int> free_slots_;
  int slots_ = 0;
  int take_slot(int mb);
  bool placeholder_rows() const;
};

// The seed of global layer `index`'s weights.
std::uint64_t layer_seed(std::uint64_t seed, int index);

}  // namespace suite::mesh

// Attention over the context-parallel group, as the layer's part (sp_tp/layer_parts.hpp): the
// layer's QKV rows of this CP rank's c tokens go to ring_attention's RingAttention (the ring or
// its all-gather variant) or to ulysses' UlyssesAttention (Ulysses, or a hybrid with the ring
// across Ulysses groups), each on the CP communicator of the device mesh; the output and, in the
// backward, dQ, dK, dV come back into the layer's buffers. The methods are those benchmarks'
// own code; this file only moves rows between the layouts ([rows, Q | K | V] against their
// separate Q, K and V buffers of the same [token, batch, heads, d] order).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "bench/ring_attention/ring_attention.hpp"
#include "bench/sp_tp/layer_parts.hpp"
#include "bench/ulysses/ulysses_attention.hpp"
#include "common/mesh/device_mesh.hpp"

namespace suite::mesh {

class CpAttention final : public sp_tp::AttentionPart {
 public:
  // Collective over the CP group (Ulysses' sub-groups are made on first use).
  CpAttention(const MeshConfig& cfg, Device& device, DeviceMesh& mesh,
              kernels::AttentionEngine& engine);

  void forward(const void* qkv, void* out, PhaseTimer& phases) override;
  void backward(const void* d_out, void* d_qkv, PhaseTimer& phases) override;

  // Global positions of this rank's c tokens, in the order of its rows.
  const std::vector<std::int64_t>& positions() const { return positions_; }
  // The ring (or the hybrid's ring part): its per-round times since the last call.
  std::vector<ring::RoundTimes> collect_times();
  // The methods' own buffers (Q, K, V, output and what the backward keeps), allocated by them.
  std::int64_t method_bytes() const;

 private:
  // Copies `cols` columns at column `col` of the layer's [rows, width] buffer to or from a
  // dense [rows, cols] buffer of the methods, converting `src_type` to the layer's type.
  void to_method(const void* layer, std::int64_t width, std::int64_t col, std::int64_t cols,
                 void* method) const;
  void to_layer(const void* method, DType src_type, std::int64_t cols, void* layer,
                std::int64_t width, std::int64_t col);

  // The test hook SUITE_TEST_FREEZE (cp_attention.cpp): where this rank stops itself, once.
  enum class Freeze { none, before_cp, before_tp };
  void maybe_freeze(Freeze at);

  MeshConfig cfg_;
  Device& device_;
  Freeze freeze_ = Freeze::none;
  int world_rank_ = 0;
  kernels::AttentionEngine& engine_;
  std::unique_ptr<ring::RingAttention> ring_;
  std::unique_ptr<ulysses::UlyssesAttention> ulysses_;
  std::vector<std::int64_t> positions_;
  std::int64_t rows_ = 0, q_cols_ = 0, kv_cols_ = 0;
  std::size_t e_ = 0;
  Buffer cast_;  // a gradient in the layer's type before it is copied into d_qkv
};

}  // namespace suite::mesh

// Shape and options of the transformer layer, its validation, and the deterministic values
// (weights, inputs) every rank derives for its own shard without any communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/harness/pass_list.hpp"
#include "kernels/attention/attention_engine.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::sp_tp {

enum class Variant { tp, tp_sp };

// TP+SP's collectives: blocking (none), each cut into t ring steps beside the GEMM that
// consumes or produces its blocks (ring: METHODS.md 1.1, the collective matmul), or each cut
// into K pieces of every rank's rows, a piece's collective running while the GEMM of the piece
// before it (all-gather) or after it (reduce-scatter) computes (chunks:K, pipelined).
enum class TpOverlap { none, ring, chunks };

struct TpOverlapMode {
  TpOverlap kind = TpOverlap::none;
  int chunks = 0;  // K of chunks:K
  bool operator==(const TpOverlapMode&) const = default;
  // none, ring, chunks:K (the flag's spelling and the tp_overlap parameter)
  std::string name() const;
  // The case name's suffix after "_ov": ring, chunks4.
  std::string tag() const;
};

constexpr const char* variant_name(Variant v) {
  return v == Variant::tp ? "tp" : "tp_sp";
}

struct LayerConfig {
  std::int64_t s = 1024, b = 1, h = 1024, heads = 16, d_ff = 0;  // d_ff 0: 4h
  std::int64_t kv_heads = 0;                                     // GQA's n_kv; 0: heads
  int t = 1;                                                     // TP group size
  float dropout = 0.1f;
  bool causal = true;
  bool fused_attention = true;  // false: materialise scores (the 5as/h activation term)
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;  // fused path
  DType dtype = DType::fp32;
  std::uint64_t seed = 1234;
  Pass pass = Pass::fwd;     // fwd_bwd: a training step, the backward after the forward
  bool bwd_overlap = true;   // TP+SP backward: LayerNorm-output all-gathers overlap GEMMs
  TpOverlapMode tp_overlap;  // TP+SP: collectives beside their GEMMs
  // false: a part of the caller's (layer_parts.hpp, e.g. an MoE layer) replaces the MLP, and
  // the layer holds no fc1 / fc2 weights.
  bool dense_mlp = true;

  bool backward() const { return pass == Pass::fwd_bwd; }
  std::int64_t ffn() const { return d_ff > 0 ? d_ff : 4 * h; }
  std::int64_t head_dim() const { return h / heads; }
  std::int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  // Columns of the QKV projection's output on each of t ranks: its Q heads, then its K and V.
  std::int64_t qkv_cols(int ranks) const { return (heads + 2 * kv()) * head_dim() / ranks; }
  std::int64_t rows() const { return s * b; }  // tokens, row = s_idx * b + b_idx
};

// Throws UsageError naming the first constraint the shape breaks (divisibility by t, head
// dimension the attention kernel supports, dropout range).
void validate(const LayerConfig& c);

// Deterministic values keyed by (seed, tensor, global row, global column), so each rank
// builds its slice of the same global tensor.
enum class Tensor : std::uint64_t {
  input = 1,
  ln1_gamma,
  ln1_beta,
  ln2_gamma,
  ln2_beta,
  w_qkv,
  w_out,
  w_fc1,
  w_fc2,
  d_output  // the gradient fed into the backward (the loss is sum(d_output * output))
};
double init_value(std::uint64_t seed, Tensor t, std::int64_t row, std::int64_t col);

// Row-major [rows, cols] slice of a global tensor: rows [r0, r0 + rows), columns listed in
// `cols` (global indices).
std::vector<double> init_slice(std::uint64_t seed, Tensor t, std::int64_t r0, std::int64_t rows,
                               const std::vector<std::int64_t>& cols);

std::vector<std::int64_t> column_range(std::int64_t begin, std::int64_t end);

}  // namespace suite::sp_tp

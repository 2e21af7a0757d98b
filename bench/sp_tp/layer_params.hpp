// The layer's parameters as slices of global tensors: which rows and columns of each global
// weight this rank holds (column-parallel QKV and fc1 take its heads / columns, row-parallel
// output projection and fc2 the matching rows, LayerNorm weights are whole on every rank), so
// every rank builds, perturbs and gathers its slice without communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sp_tp/layer_config.hpp"

namespace suite::sp_tp {

// Global columns [first, first + count).
struct ColumnSpan {
  std::int64_t first = 0, count = 0;
};

struct ParamSlice {
  std::string name;  // ln1_gamma, ..., w_fc2 (the results file's weight_<name>)
  Tensor tensor;
  std::int64_t global_rows = 0, global_cols = 0;
  std::int64_t r0 = 0, rows = 0;  // global rows [r0, r0 + rows)
  // Its global columns in the slice's column order, as spans: a layer keeps its slices, and
  // spelled out they would take some 0.9 MB a rank at h = 16384 (a simulated rank's share).
  std::vector<ColumnSpan> spans;
  double scale = 1;         // 1/sqrt(fan-in) for the matmul weights
  bool replicated = false;  // every rank holds all of it (the LayerNorm weights)
  std::int64_t col_count() const;
  std::vector<std::int64_t> cols() const;  // the spans' columns, one by one
  std::int64_t elems() const { return rows * col_count(); }
};

// Rank `rank` of `t`'s slices, in the order ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, w_qkv,
// w_out, w_fc1, w_fc2 (the four LayerNorm ones first: their gradients share one buffer); no
// w_fc1, w_fc2 when a part replaces the MLP (cfg.dense_mlp false).
std::vector<ParamSlice> param_slices(const LayerConfig& cfg, int rank, int t);
constexpr int kLayerNormParams = 4;

// The slice's values (row-major [rows, cols.size()]): init_value * scale, plus eps times the
// finite-difference direction (keyed by the same global indices, so every rank and both
// variants move the same global point).
std::vector<double> slice_values(std::uint64_t seed, const ParamSlice& s, double eps = 0);
std::vector<double> slice_direction(std::uint64_t seed, const ParamSlice& s);
// The direction of the layer input rows [r0, r0 + rows) (all h columns).
std::vector<double> input_direction(std::uint64_t seed, std::int64_t r0, std::int64_t rows,
                                    std::int64_t h);

// The global [global_rows, global_cols] tensor from every rank's slice values (by_rank[r] =
// rank r's slice_values layout).
std::vector<double> assemble(const std::vector<ParamSlice>& slices_by_rank,
                             const std::vector<std::vector<double>>& by_rank);

}  // namespace suite::sp_tp

#include "bench/sp_tp/layer_params.hpp"

#include <cmath>

namespace suite::sp_tp {
namespace {

// The finite-difference direction: its own stream of the same counter-based values.
constexpr std::uint64_t kDirectionSalt = 0xd1d1d1d1;

}  // namespace

std::int64_t ParamSlice::col_count() const {
  std::int64_t n = 0;
  for (const ColumnSpan& c : spans)
    n += c.count;
  return n;
}

std::vector<std::int64_t> ParamSlice::cols() const {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(col_count()));
  for (const ColumnSpan& c : spans)
    for (std::int64_t j = c.first; j < c.first + c.count; ++j)
      out.push_back(j);
  return out;
}

std::vector<ParamSlice> param_slices(const LayerConfig& cfg, int rank, int t) {
  const std::int64_t h = cfg.h, hl = h / t, ff = cfg.ffn(), fl = ff / t, r = rank;
  const std::vector<ColumnSpan> all_h{{0, h}};
  const double inv_h = 1 / std::sqrt(static_cast<double>(h));
  std::vector<ParamSlice> s;
  for (auto [name, tensor] : {std::pair{"ln1_gamma", Tensor::ln1_gamma},
                              {"ln1_beta", Tensor::ln1_beta},
                              {"ln2_gamma", Tensor::ln2_gamma},
                              {"ln2_beta", Tensor::ln2_beta}})
    s.push_back({name, tensor, 1, h, 0, 1, all_h, 1.0, true});
  // Q, K, V blocks of the global [h, (a + 2 n_kv) d]: this rank's Q heads and its K/V heads.
  const std::int64_t d = cfg.head_dim(), q_cols = cfg.heads * d, kv_cols = cfg.kv() * d,
                     ql = q_cols / t, kvl = kv_cols / t;
  const std::vector<ColumnSpan> qkv_cols{
      {r * ql, ql}, {q_cols + r * kvl, kvl}, {q_cols + kv_cols + r * kvl, kvl}};
  s.push_back({"w_qkv", Tensor::w_qkv, h, q_cols + 2 * kv_cols, 0, h, qkv_cols, inv_h, false});
  s.push_back({"w_out", Tensor::w_out, h, h, r * hl, hl, all_h, inv_h, false});
  if (!cfg.dense_mlp) return s;
  s.push_back({"w_fc1", Tensor::w_fc1, h, ff, 0, h, {{r * fl, fl}}, inv_h, false});
  s.push_back({"w_fc2", Tensor::w_fc2, ff, h, r * fl, fl, all_h,
               1 / std::sqrt(static_cast<double>(ff)), false});
  return s;
}

std::vector<double> slice_values(std::uint64_t seed, const ParamSlice& s, double eps) {
  std::vector<double> v = init_slice(seed, s.tensor, s.r0, s.rows, s.cols());
  for (auto& x : v)
    x *= s.scale;
  if (eps != 0) {
    const std::vector<double> d = slice_direction(seed, s);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] += eps * d[i];
  }
  return v;
}

std::vector<double> slice_direction(std::uint64_t seed, const ParamSlice& s) {
  std::vector<double> d = init_slice(seed ^ kDirectionSalt, s.tensor, s.r0, s.rows, s.cols());
  for (auto& x : d)
    x *= s.scale;  // the weights' own scale: a step of eps moves each by a comparable fraction
  return d;
}

std::vector<double> input_direction(std::uint64_t seed, std::int64_t r0, std::int64_t rows,
                                    std::int64_t h) {
  return init_slice(seed ^ kDirectionSalt, Tensor::input, r0, rows, column_range(0, h));
}

std::vector<double> assemble(const std::vector<ParamSlice>& slices_by_rank,
                             const std::vector<std::vector<double>>& by_rank) {
  const ParamSlice& first = slices_by_rank.front();
  std::vector<double> full(static_cast<std::size_t>(first.global_rows * first.global_cols));
  for (std::size_t k = 0; k < slices_by_rank.size(); ++k) {
    const ParamSlice& s = slices_by_rank[k];
    const std::vector<std::int64_t> cols = s.cols();
    const std::int64_t nc = static_cast<std::int64_t>(cols.size());
    for (std::int64_t i = 0; i < s.rows; ++i)
      for (std::int64_t j = 0; j < nc; ++j)
        full[static_cast<std::size_t>((s.r0 + i) * s.global_cols + cols[j])] =
            by_rank[k][static_cast<std::size_t>(i * nc + j)];
  }
  return full;
}

}  // namespace suite::sp_tp

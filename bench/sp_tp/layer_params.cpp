#include "bench/sp_tp/layer_params.hpp"

#include <cmath>

namespace suite::sp_tp {
namespace {

// The finite-difference direction: its own stream of the same counter-based values.
constexpr std::uint64_t kDirectionSalt = 0xd1d1d1d1;

}  // namespace

std::vector<ParamSlice> param_slices(const LayerConfig& cfg, int rank, int t) {
  const std::int64_t h = cfg.h, hl = h / t, ff = cfg.ffn(), fl = ff / t, r = rank;
  const auto all_h = column_range(0, h);
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
  std::vector<std::int64_t> qkv_cols;
  for (std::int64_t c = r * ql; c < (r + 1) * ql; ++c)
    qkv_cols.push_back(c);
  for (std::int64_t part = 0; part < 2; ++part)
    for (std::int64_t c = r * kvl; c < (r + 1) * kvl; ++c)
      qkv_cols.push_back(q_cols + part * kv_cols + c);
  s.push_back({"w_qkv", Tensor::w_qkv, h, q_cols + 2 * kv_cols, 0, h, qkv_cols, inv_h, false});
  s.push_back({"w_out", Tensor::w_out, h, h, r * hl, hl, all_h, inv_h, false});
  if (!cfg.dense_mlp) return s;
  s.push_back(
      {"w_fc1", Tensor::w_fc1, h, ff, 0, h, column_range(r * fl, (r + 1) * fl), inv_h, false});
  s.push_back({"w_fc2", Tensor::w_fc2, ff, h, r * fl, fl, all_h,
               1 / std::sqrt(static_cast<double>(ff)), false});
  return s;
}

std::vector<double> slice_values(std::uint64_t seed, const ParamSlice& s, double eps) {
  std::vector<double> v = init_slice(seed, s.tensor, s.r0, s.rows, s.cols);
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
  std::vector<double> d = init_slice(seed ^ kDirectionSalt, s.tensor, s.r0, s.rows, s.cols);
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
    const std::int64_t nc = static_cast<std::int64_t>(s.cols.size());
    for (std::int64_t i = 0; i < s.rows; ++i)
      for (std::int64_t j = 0; j < nc; ++j)
        full[static_cast<std::size_t>((s.r0 + i) * s.global_cols + s.cols[j])] =
            by_rank[k][static_cast<std::size_t>(i * nc + j)];
  }
  return full;
}

}  // namespace suite::sp_tp

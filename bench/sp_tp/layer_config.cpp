#include "bench/sp_tp/layer_config.hpp"

#include <cmath>
#include <string>

#include "common/harness/errors.hpp"
#include "kernels/core/counter_rng.hpp"

namespace suite::sp_tp {

std::string TpOverlapMode::name() const {
  switch (kind) {
    case TpOverlap::none:
      return "none";
    case TpOverlap::ring:
      return "ring";
    case TpOverlap::chunks:
      return "chunks:" + std::to_string(chunks);
  }
  return "?";
}

std::string TpOverlapMode::tag() const {
  return kind == TpOverlap::chunks ? "chunks" + std::to_string(chunks) : name();
}

void validate(const LayerConfig& c) {
  auto need = [](bool ok, const std::string& why) {
    if (!ok) throw UsageError("layer: " + why);
  };
  need(c.s > 0 && c.b > 0 && c.h > 0 && c.heads > 0 && c.ffn() > 0,
       "--seq, --batch, --hidden, --heads must be >= 1");
  need(c.h % c.heads == 0, "--hidden " + std::to_string(c.h) + " is not a multiple of --heads " +
                               std::to_string(c.heads));
  need(c.head_dim() == 64 || c.head_dim() == 128,
       "head dimension h/heads = " + std::to_string(c.head_dim()) +
           " is not supported by the attention kernel (64 or 128)");
  const std::string t = std::to_string(c.t);
  need(c.heads % c.t == 0,
       "--heads " + std::to_string(c.heads) + " is not divisible by t = " + t + " ranks");
  need(c.kv() >= 1 && c.heads % c.kv() == 0,
       "--kv-heads " + std::to_string(c.kv()) + " must divide --heads " + std::to_string(c.heads));
  need(c.kv() % c.t == 0, "--kv-heads " + std::to_string(c.kv()) + " is not divisible by t = " + t +
                              " ranks (each TP rank needs whole K/V heads)");
  need(c.fused_attention || c.kv() == c.heads,
       "the unfused attention path is multi-head only (--kv-heads = --heads)");
  need(c.s % c.t == 0, "--seq " + std::to_string(c.s) + " is not divisible by t = " + t +
                           " (SP shards the sequence)");
  need(c.ffn() % c.t == 0,
       "--ffn-hidden " + std::to_string(c.ffn()) + " is not divisible by t = " + t);
  need(c.dropout >= 0 && c.dropout < 1, "--dropout must be in [0, 1)");
  if (c.tp_overlap.kind == TpOverlap::chunks)
    need(c.tp_overlap.chunks <= c.rows() / c.t,
         "--tp-overlap " + c.tp_overlap.name() + ": K is above the " +
             std::to_string(c.rows() / c.t) + " rows (s*b/t) a rank holds");
}

double init_value(std::uint64_t seed, Tensor t, std::int64_t row, std::int64_t col) {
  std::uint64_t bits =
      kernels::counter_hash(seed ^ (static_cast<std::uint64_t>(t) << 56),
                            static_cast<std::uint64_t>(row), static_cast<std::uint64_t>(col));
  double u = static_cast<double>(bits >> 11) * 0x1.0p-53 * 2 - 1;  // uniform in [-1, 1)
  switch (t) {
    case Tensor::ln1_gamma:
    case Tensor::ln2_gamma:
      return 1 + 0.1 * u;
    case Tensor::ln1_beta:
    case Tensor::ln2_beta:
      return 0.1 * u;
    case Tensor::input:
    case Tensor::d_output:
      return u;
    default:
      return u * 0.5;  // weights; scaled by 1/sqrt(fan-in) in init_slice's caller
  }
}

std::vector<double> init_slice(std::uint64_t seed, Tensor t, std::int64_t r0, std::int64_t rows,
                               const std::vector<std::int64_t>& cols) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(rows) * cols.size());
  for (std::int64_t r = r0; r < r0 + rows; ++r)
    for (std::int64_t c : cols)
      out.push_back(init_value(seed, t, r, c));
  return out;
}

std::vector<std::int64_t> column_range(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> cols;
  for (std::int64_t c = begin; c < end; ++c)
    cols.push_back(c);
  return cols;
}

}  // namespace suite::sp_tp

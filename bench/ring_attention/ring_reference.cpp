#include "bench/ring_attention/ring_reference.hpp"

#include <algorithm>
#include <cmath>

#include "bench/ring_attention/attention_inputs.hpp"
#include "kernels/attention/attention_cpu.hpp"

namespace suite::ring {
namespace {

constexpr double kMaxReferenceFlops = 4e10;  // a few seconds of the CPU kernel in double
constexpr double kMaxReferenceBytes = 4e9;

}  // namespace

double reference_tolerance(DType t) {
  switch (t) {
    case DType::fp64:
      return 1e-9;
    case DType::fp32:
      return 2e-4;
    case DType::bf16:
      return 3e-2;  // bf16 output (8 bits) and bf16 probabilities in the tensor-core kernels
  }
  return 0;
}

ReferenceComparison compare_with_full_attention(const RingConfig& cfg, std::uint64_t seed,
                                                const std::vector<Segment>& segments,
                                                const std::vector<std::int64_t>& positions,
                                                const std::vector<double>& o,
                                                const std::vector<double>& lse) {
  ReferenceComparison out;
  const double flops =
      4.0 * cfg.c * static_cast<double>(cfg.s()) * cfg.batch * cfg.heads * cfg.head_dim;
  const double bytes =
      8.0 * static_cast<double>(cfg.s()) * cfg.batch * cfg.kv_heads * cfg.head_dim * 2;
  if (flops > kMaxReferenceFlops || bytes > kMaxReferenceBytes) {
    out.skipped = true;
    out.why_skipped = "the host reference would need " + std::to_string(flops / 1e9) +
                      " GFLOP and " + std::to_string(bytes / 1e9) + " GB (limits " +
                      std::to_string(kMaxReferenceFlops / 1e9) + " GFLOP, " +
                      std::to_string(kMaxReferenceBytes / 1e9) + " GB)";
    return out;
  }
  std::vector<std::int64_t> all(static_cast<std::size_t>(cfg.s()));
  for (std::int64_t i = 0; i < cfg.s(); ++i)
    all[static_cast<std::size_t>(i)] = i;
  const auto k = stored_attention_input(seed, InputTensor::k, all, cfg.batch, cfg.kv_heads,
                                        cfg.head_dim, cfg.dtype);
  const auto v = stored_attention_input(seed, InputTensor::v, all, cfg.batch, cfg.kv_heads,
                                        cfg.head_dim, cfg.dtype);
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  const std::int64_t q_head_row = static_cast<std::int64_t>(cfg.heads) * cfg.head_dim;

  for (const Segment& seg : segments) {
    const std::vector<std::int64_t> pos(positions.begin() + seg.local_offset,
                                        positions.begin() + seg.local_offset + seg.count);
    const auto q = stored_attention_input(seed, InputTensor::q, pos, cfg.batch, cfg.heads,
                                          cfg.head_dim, cfg.dtype);
    std::vector<double> o_ref(q.size()), lse_ref(static_cast<std::size_t>(cfg.heads * seg.count));
    for (std::int64_t bi = 0; bi < cfg.batch; ++bi) {
      auto p = kernels::make_attention_params(seg.count, cfg.s(), cfg.heads, cfg.kv_heads,
                                              cfg.head_dim, cfg.causal);
      p.ld_q = p.ld_o = cfg.q_row();
      p.ld_k = p.ld_v = cfg.kv_row();
      kernels::cpu::attention_forward<double>(
          p, q.data() + bi * q_head_row, k.data() + bi * kv_head_row, v.data() + bi * kv_head_row,
          pos.data(), all.data(), o_ref.data() + bi * q_head_row, lse_ref.data());
      for (std::int64_t i = 0; i < seg.count; ++i)
        for (std::int64_t j = 0; j < q_head_row; ++j) {
          const double got = o[static_cast<std::size_t>((seg.local_offset + i) * cfg.q_row() +
                                                        bi * q_head_row + j)];
          const double want =
              o_ref[static_cast<std::size_t>(i * cfg.q_row() + bi * q_head_row + j)];
          const double err = std::fabs(got - want);
          out.max_err_o = std::isnan(err) ? INFINITY : std::max(out.max_err_o, err);
        }
      const std::int64_t lse_off = (bi * cfg.c + seg.local_offset) * cfg.heads;
      if (lse.empty()) continue;  // the caller has no lse in this layout (Ulysses)
      for (std::int64_t i = 0; i < cfg.heads * seg.count; ++i) {
        const double want = lse_ref[static_cast<std::size_t>(i)];
        const double err =
            std::fabs(lse[static_cast<std::size_t>(lse_off + i)] - want) / (1 + std::fabs(want));
        out.max_err_lse = std::isnan(err) ? INFINITY : std::max(out.max_err_lse, err);
      }
    }
  }
  return out;
}

}  // namespace suite::ring

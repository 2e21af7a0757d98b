#include "bench/ring_attention/ring_reference.hpp"

#include <algorithm>
#include <cmath>

#include "bench/ring_attention/attention_inputs.hpp"
#include "kernels/attention/attention_cpu.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::ring {
namespace {

constexpr double kMaxReferenceFlops = 4e10;  // a few seconds of the CPU kernel in double
constexpr double kMaxReferenceBytes = 4e9;

}  // namespace

double reference_tolerance(DType t) {
  // bf16: bf16 output (8 bits) and bf16 probabilities in the tensor-core kernels.
  return PerDType{.fp32 = 2e-4, .fp64 = 1e-9, .bf16 = 3e-2}.at(t);
}

namespace {

// Why the reference is skipped for this much work on the host, or "" when it runs.
std::string too_big(double flops, double bytes) {
  if (flops <= kMaxReferenceFlops && bytes <= kMaxReferenceBytes) return {};
  return "the host reference would need " + std::to_string(flops / 1e9) + " GFLOP and " +
         std::to_string(bytes / 1e9) + " GB (limits " + std::to_string(kMaxReferenceFlops / 1e9) +
         " GFLOP, " + std::to_string(kMaxReferenceBytes / 1e9) + " GB)";
}

std::vector<std::int64_t> all_positions(std::int64_t s, std::int64_t first = 0) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(s));
  for (std::int64_t i = 0; i < s; ++i)
    all[static_cast<std::size_t>(i)] = first + i;
  return all;
}

// The runs of one document each within increasing positions: [begin, end) index ranges and
// the document's token range. Without documents, one run over all keys [0, s).
struct DocumentRun {
  std::size_t begin, end;
  std::int64_t first_key, keys;
};
std::vector<DocumentRun> document_runs(const RingConfig& cfg,
                                       const std::vector<std::int64_t>& pos) {
  const PackedDocuments* docs = cfg.documents();
  if (docs == nullptr) return {{0, pos.size(), 0, cfg.s()}};
  std::vector<DocumentRun> runs;
  for (std::size_t i = 0; i < pos.size();) {
    const std::int64_t d = docs->document_of(pos[i]);
    std::size_t j = i;
    while (j < pos.size() && docs->document_of(pos[j]) == d)
      ++j;
    runs.push_back({i, j, docs->start(d), docs->length(d)});
    i = j;
  }
  return runs;
}

}  // namespace

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
  out.why_skipped = too_big(flops, bytes);
  if (!out.why_skipped.empty()) {
    out.skipped = true;
    return out;
  }
  const std::vector<std::int64_t> all = all_positions(cfg.s());
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
      // With documents, each run of queries of one document against that document's keys
      // alone, on plain positions: the reference never reads a document tag.
      for (const DocumentRun& run : document_runs(cfg, pos)) {
        const auto rows = static_cast<std::int64_t>(run.end - run.begin);
        auto p = kernels::make_attention_params(rows, run.keys, cfg.heads, cfg.kv_heads,
                                                cfg.head_dim, cfg.causal);
        p.ld_q = p.ld_o = cfg.q_row();
        p.ld_k = p.ld_v = cfg.kv_row();
        const auto r0 = static_cast<std::int64_t>(run.begin);
        std::vector<double> lse_run(static_cast<std::size_t>(cfg.heads * rows));
        kernels::cpu::attention_forward<double>(
            p, q.data() + r0 * cfg.q_row() + bi * q_head_row,
            k.data() + run.first_key * cfg.kv_row() + bi * kv_head_row,
            v.data() + run.first_key * cfg.kv_row() + bi * kv_head_row, pos.data() + r0,
            all.data() + run.first_key, o_ref.data() + r0 * cfg.q_row() + bi * q_head_row,
            lse_run.data());
        for (int h = 0; h < cfg.heads; ++h)
          for (std::int64_t i = 0; i < rows; ++i)
            lse_ref[static_cast<std::size_t>(h * seg.count + r0 + i)] =
                lse_run[static_cast<std::size_t>(h * rows + i)];
      }
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

double GradientComparison::max_err() const {
  return std::max({max_err_dq, max_err_dk, max_err_dv});
}

double gradient_tolerance(DType storage, DType grad) {
  if (storage == DType::bf16 || grad == DType::bf16) return 5e-2;
  return storage == DType::fp64 && grad == DType::fp64 ? 1e-9 : 1e-4;
}

GradientComparison compare_gradients_with_full_attention(const RingConfig& cfg, std::uint64_t seed,
                                                         const std::vector<std::int64_t>& positions,
                                                         const std::vector<double>& dq,
                                                         const std::vector<double>& dkv) {
  GradientComparison out;
  const double s = static_cast<double>(cfg.s());
  const double flops = 14.0 * s * s * cfg.batch * cfg.heads * cfg.head_dim;  // fwd + bwd
  const double bytes = 8.0 * s * cfg.batch * (3.0 * cfg.heads + 4.0 * cfg.kv_heads) * cfg.head_dim;
  out.why_skipped = too_big(flops, bytes);
  if (!out.why_skipped.empty()) {
    out.skipped = true;
    return out;
  }
  const std::vector<std::int64_t> all = all_positions(cfg.s());
  auto input = [&](InputTensor which, int heads) {
    return stored_attention_input(seed, which, all, cfg.batch, heads, cfg.head_dim, cfg.dtype);
  };
  const auto q = input(InputTensor::q, cfg.heads), d_o = input(InputTensor::d_o, cfg.heads);
  const auto k = input(InputTensor::k, cfg.kv_heads), v = input(InputTensor::v, cfg.kv_heads);
  std::vector<double> o(q.size()), dq_ref(q.size(), 0.0), dk_ref(k.size(), 0.0),
      dv_ref(v.size(), 0.0), lse(static_cast<std::size_t>(cfg.heads * cfg.s())), delta(lse.size());
  const std::int64_t q_head_row = static_cast<std::int64_t>(cfg.heads) * cfg.head_dim;
  const std::int64_t kv_head_row = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim;
  // With documents, each document's attention on its own (plain positions, no tags).
  for (std::int64_t bi = 0; bi < cfg.batch; ++bi)
    for (const DocumentRun& run : document_runs(cfg, all)) {
      const std::int64_t t0 = run.first_key, n = run.keys;
      auto p =
          kernels::make_attention_params(n, n, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.causal);
      p.ld_q = p.ld_o = cfg.q_row();
      p.ld_k = p.ld_v = cfg.kv_row();
      const std::int64_t qo = t0 * cfg.q_row() + bi * q_head_row;
      const std::int64_t ko = t0 * cfg.kv_row() + bi * kv_head_row;
      const std::int64_t* at = all.data() + t0;
      kernels::cpu::attention_forward<double>(p, q.data() + qo, k.data() + ko, v.data() + ko, at,
                                              at, o.data() + qo, lse.data());
      kernels::cpu::attention_backward_delta<double>(n, cfg.heads, cfg.head_dim, o.data() + qo,
                                                     d_o.data() + qo, p.ld_o, delta.data());
      kernels::cpu::attention_backward<double>(
          p, q.data() + qo, k.data() + ko, v.data() + ko, d_o.data() + qo, lse.data(), delta.data(),
          at, at, dq_ref.data() + qo, dk_ref.data() + ko, dv_ref.data() + ko);
    }
  // Largest |got - ref| over this rank's rows of one tensor, relative to its largest |ref|.
  auto compare = [&](const std::vector<double>& got, std::size_t got_offset,
                     const std::vector<double>& ref, std::int64_t row) {
    double scale = 0, err = 0;
    for (double r : ref)
      scale = std::max(scale, std::fabs(r));
    for (std::size_t i = 0; i < positions.size(); ++i)
      for (std::int64_t j = 0; j < row; ++j) {
        const double g = got[got_offset + i * static_cast<std::size_t>(row) + j];
        const double d = std::fabs(g - ref[static_cast<std::size_t>(positions[i] * row + j)]);
        err = std::isnan(d) ? INFINITY : std::max(err, d);
      }
    return scale > 0 ? err / scale : err;
  };
  out.max_err_dq = compare(dq, 0, dq_ref, cfg.q_row());
  out.max_err_dk = compare(dkv, 0, dk_ref, cfg.kv_row());
  out.max_err_dv =
      compare(dkv, static_cast<std::size_t>(cfg.c * cfg.kv_row()), dv_ref, cfg.kv_row());
  return out;
}

}  // namespace suite::ring

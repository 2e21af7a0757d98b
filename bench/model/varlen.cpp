#include "bench/model/varlen.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "bench/ring_attention/ring_work.hpp"
#include "common/errors.hpp"
#include "common/model.hpp"

namespace suite::model_cli {
namespace {

namespace m = suite::model;
using ring::Layout;

struct Row {
  int n_c, u, ring_degree;
  std::string layout;
  std::int64_t s, c, documents, longest;
  double padding, max_over_mean, lockstep_blocks, eff_ring, eff_allgather, bytes, seconds;
  // Block pairs of the ring's runs (one ring, all rounds): skipped (no visible pair) and masked
  // (some hidden), as the benchmarks' census counts them; -1 for plain Ulysses (no ring).
  std::int64_t blocks_skipped = -1, blocks_masked = -1;
};

// The ring (part) of N_c / u ranks over c_ring tokens each, under one layout.
Row ring_row(const VarlenOptions& o, const ring::DocSpec& spec, int n_c, int u, std::int64_t c,
             Layout layout) {
  const int G = n_c / u;
  ring::RingConfig cfg;
  cfg.n_c = G;
  cfg.c = c * u;
  cfg.layout = layout;
  cfg.causal = o.causal;
  ring::validate_layout(layout, cfg.c, G);
  const auto t0 = std::chrono::steady_clock::now();
  ring::attach_documents(cfg, spec, o.seed);
  const ring::RingWork w = ring::ring_work(cfg);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const m::Ring shape{o.h, static_cast<double>(cfg.c), G, o.g, o.e, o.causal, o.b};
  double bytes = m::ring_bytes_per_layer(shape);
  if (u > 1)
    bytes +=
        m::hybrid_ulysses_bytes_per_layer(static_cast<double>(cfg.s()), o.h, n_c, u, o.g, o.e) *
        o.b;
  const ring::PackedDocuments& d = *cfg.docs;
  return {n_c,
          u,
          G,
          std::string(ring::layout_name(layout)),
          cfg.s(),
          c,
          d.count(),
          d.longest(),
          static_cast<double>(d.pad_slots()) / static_cast<double>(d.slots()),
          w.max_over_mean(),
          static_cast<double>(w.lockstep()) / (static_cast<double>(cfg.c) * cfg.c),
          w.efficiency_lockstep(),
          w.efficiency_balance(),
          bytes,
          secs,
          w.blocks_skipped(),
          w.blocks_masked()};
}

// Plain Ulysses: every rank attends over all s tokens for a / N_c heads, so every rank does the
// same work whatever the documents (max / mean = 1 by construction).
Row ulysses_row(const VarlenOptions& o, const ring::DocSpec& spec, int n_c, std::int64_t c) {
  const std::int64_t s = c * n_c;
  const auto d = ring::PackedDocuments::pack(spec, s, o.seed);
  return {n_c,       n_c,
          1,         "ulysses",
          s,         c,
          d.count(), d.longest(),
          0.0,       1.0,
          NAN,       1.0,
          1.0,       m::ulysses_bytes_per_layer(static_cast<double>(s), o.h, n_c, o.g, o.e) * o.b,
          0.0};
}

}  // namespace

void print_varlen(const VarlenOptions& o) {
  ring::DocSpec spec = ring::parse_doc_spec(o.docs);
  spec.balanced_chunk = o.balanced_chunk;
  std::vector<Layout> layouts;
  for (const std::string& name : o.layouts) {
    const auto l = ring::parse_layout(name);
    if (!l) throw UsageError("--layout: unknown layout '" + name + "'");
    layouts.push_back(*l);
  }
  std::vector<Row> rows;
  for (int n_c : o.cp) {
    std::int64_t c = o.tokens_per_rank;
    if (c == 0) {
      if (o.s < n_c || std::fmod(o.s, n_c) != 0)
        throw UsageError("--seq " + std::to_string(static_cast<std::int64_t>(o.s)) +
                         " is not a multiple of N_c = " + std::to_string(n_c));
      c = static_cast<std::int64_t>(o.s) / n_c;
    }
    const int u = o.u > 0 ? o.u : 1;
    if (n_c % u != 0)
      throw UsageError("--ulysses-degree " + std::to_string(u) +
                       " does not divide N_c = " + std::to_string(n_c));
    if (n_c / u > 1 || u == 1)
      for (Layout l : layouts)
        rows.push_back(ring_row(o, spec, n_c, u, c, l));
    rows.push_back(ulysses_row(o, spec, n_c, c));
  }
  std::printf(
      "Packed documents (%s, seed %llu, %s within each document): exact visible pairs per rank "
      "and round\n(eff_ring = mean / lockstep: the ring waits for each round's busiest rank; "
      "eff_allgather = mean / max)\n",
      spec.text.c_str(), static_cast<unsigned long long>(o.seed),
      o.causal ? "causal" : "full attention");
  if (o.balanced_chunk > 0 &&
      std::find(layouts.begin(), layouts.end(), Layout::balanced) != layouts.end())
    std::printf("(balanced: chunks of at least %lld tokens where it has the choice)\n",
                static_cast<long long>(o.balanced_chunk));
  std::printf("%6s %4s %5s %-11s %9s %7s %8s %8s %9s %9s %9s %9s %11s %13s %11s %11s %8s\n", "N_c",
              "u", "ring", "layout", "s", "c", "docs", "longest", "padding", "max/mean", "lockstep",
              "eff_ring", "eff_allgath", "bytes/rank", "blk_skipped", "blk_masked", "count_s");
  for (const Row& r : rows)
    std::printf(
        "%6d %4d %5d %-11s %9lld %7lld %8lld %8lld %8.2f%% %9.3f %9.2f %9.3f %11.3f %13.4g "
        "%11lld %11lld %8.3f\n",
        r.n_c, r.u, r.ring_degree, r.layout.c_str(), static_cast<long long>(r.s),
        static_cast<long long>(r.c), static_cast<long long>(r.documents),
        static_cast<long long>(r.longest), 100 * r.padding, r.max_over_mean, r.lockstep_blocks,
        r.eff_ring, r.eff_allgather, r.bytes, static_cast<long long>(r.blocks_skipped),
        static_cast<long long>(r.blocks_masked), r.seconds);
  std::printf(
      "bytes/rank: the mask changes no byte (the ring sends every K/V block on; all-gather sends "
      "the same N_c - 1 blocks; Ulysses' all-to-alls are unchanged); doc_zigzag's padding travels "
      "too\n");
  if (o.csv.empty()) return;
  std::ofstream f(o.csv);
  if (!f) throw UsageError("--csv: cannot write " + o.csv);
  f.precision(12);
  f << "docs,seed,causal,n_c,u,ring_degree,layout,s,c,documents,longest,padding_fraction,"
       "work_max_over_mean,lockstep_blocks,pred_efficiency_lockstep,pred_efficiency_balance,"
       "bytes_per_rank,blocks_skipped,blocks_masked\n";
  for (const Row& r : rows)
    f << '"' << spec.text << "\"," << o.seed << ',' << (o.causal ? 1 : 0) << ',' << r.n_c << ','
      << r.u << ',' << r.ring_degree << ',' << r.layout << ',' << r.s << ',' << r.c << ','
      << r.documents << ',' << r.longest << ',' << r.padding << ',' << r.max_over_mean << ','
      << r.lockstep_blocks << ',' << r.eff_ring << ',' << r.eff_allgather << ',' << r.bytes << ','
      << r.blocks_skipped << ',' << r.blocks_masked << '\n';
}

}  // namespace suite::model_cli

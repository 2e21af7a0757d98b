#include "bench/model/varlen.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "bench/ring_attention/group_cast.hpp"
#include "bench/ring_attention/ring_work.hpp"
#include "common/formulas/model.hpp"
#include "common/harness/errors.hpp"

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
  // At F and W (NaN for plain Ulysses): the ring's efficiency with its transfers, each round
  // as long as its busiest rank's compute or the block's hop; the group-cast's (its own balanced
  // plan) with its transfers, the busiest rank's compute or bytes; its work max / mean, bytes per
  // rank (the more a rank sends or receives in a forward), that over the ring's, and the W above
  // which its busiest rank's bytes take no longer than the busiest rank's compute.
  double eff_ring_w = NAN, eff_gc_w = NAN, gc_max_over_mean = NAN, gc_bytes = NAN;
  double gc_over_ring = NAN, gc_hide_bw = NAN;
  int gc_sources = 0;        // the most ranks one rank receives from
  bool gc_fallback = false;  // the busiest rank would move every block: the ring's schedule
  double ring_bytes = 0;     // of the ring (part) alone: bytes less a hybrid's all-to-alls
};

// The group-cast's figures of one ring (part) config: its traffic under its own layout (balanced
// plans for one wait), and at F and W its efficiency. flops_per_pair and row_bytes (K and V of
// one token) for this ring part; exposed_s: what the step adds that no schedule hides (a
// hybrid's all-to-alls).
void group_cast_figures(const VarlenOptions& o, const ring::DocSpec& spec, ring::RingConfig cfg,
                        const ring::RingWork& ring_w, double flops_per_pair, double row_bytes,
                        double exposed_s, Row& row) {
  const ring::RingWork* w = &ring_w;
  ring::RingWork own;
  if (cfg.layout == Layout::balanced) {  // laid out again, for one wait
    cfg.variant = ring::Variant::groupcast;
    ring::attach_documents(cfg, spec, o.seed);
    own = ring::ring_work(cfg);
    w = &own;
  }
  const ring::GroupCastTraffic t = ring::group_cast_traffic(cfg);
  row.gc_fallback = t.falls_back(cfg.c);
  if (row.gc_fallback) {  // the ring's schedule runs
    row.gc_max_over_mean = ring_w.max_over_mean();
    row.gc_bytes = row.bytes;
    row.gc_over_ring = 1;
    row.eff_gc_w = row.eff_ring_w;
    return;
  }
  const std::vector<std::int64_t> work = w->rank_totals();
  double slowest = 0, busiest_bytes = 0;
  std::int64_t most_work = 0;
  for (int r = 0; r < cfg.n_c; ++r) {
    const double bytes = static_cast<double>(std::max(t.sent(r), t.received(r))) * row_bytes;
    const double compute =
        static_cast<double>(work[static_cast<std::size_t>(r)]) * flops_per_pair / o.flops;
    slowest = std::max({slowest, compute, bytes / o.bw});
    busiest_bytes = std::max(busiest_bytes, bytes);
    most_work = std::max(most_work, work[static_cast<std::size_t>(r)]);
    row.gc_sources = std::max(row.gc_sources, t.sources(r));
  }
  row.gc_max_over_mean = w->max_over_mean();
  row.gc_bytes = static_cast<double>(t.most_sent()) * row_bytes + (row.bytes - row.ring_bytes);
  row.gc_over_ring = static_cast<double>(t.most_sent()) * row_bytes / row.ring_bytes;
  row.eff_gc_w = w->mean() * flops_per_pair / o.flops / (slowest + exposed_s);
  row.gc_hide_bw = busiest_bytes / (static_cast<double>(most_work) * flops_per_pair / o.flops);
}

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
  const double ring_bytes = m::ring_bytes_per_layer(shape);
  double bytes = ring_bytes;
  if (u > 1)
    bytes +=
        m::hybrid_ulysses_bytes_per_layer(static_cast<double>(cfg.s()), o.h, n_c, u, o.g, o.e) *
        o.b;
  const ring::PackedDocuments& d = *cfg.docs;
  Row row{n_c,
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
  row.ring_bytes = ring_bytes;
  // The ring part's heads are a / u (h / u of the hidden size); its K/V heads n_kv / u.
  const double flops_per_pair = 4 * o.h / u * o.b, row_bytes = 2 * o.h / (o.g * u) * o.e * o.b;
  const double exposed_s = (bytes - ring_bytes) / o.bw;
  const double block_s = static_cast<double>(cfg.c) * row_bytes / o.bw;
  double step = exposed_s;
  for (int k = 0; k < G; ++k) {
    std::int64_t busiest = 0;
    for (int r = 0; r < G; ++r)
      busiest = std::max(busiest, w.at(k, r));
    step += std::max(static_cast<double>(busiest) * flops_per_pair / o.flops,
                     k < G - 1 ? block_s : 0.0);
  }
  row.eff_ring_w = w.mean() * flops_per_pair / o.flops / step;
  group_cast_figures(o, spec, cfg, w, flops_per_pair, row_bytes, exposed_s, row);
  return row;
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
  std::printf(
      "\nGroup-cast (--variant groupcast): each rank's K/V rows only to the ranks whose queries "
      "see them; balanced laid out\nfor it (documents cut only where they must be). At F = %.4g "
      "FLOP/s and W = %.4g B/s: eff_ring_W = the ring with its hops (each\nround the busiest "
      "rank's compute or one block's hop), eff_gc_W = mean / (the busiest rank's compute or bytes "
      "/ W);\nhides above W = the W at which the busiest rank's bytes take as long as the busiest "
      "rank's compute\n",
      o.flops, o.bw);
  std::printf("%6s %4s %-11s %9s %13s %9s %8s %10s %9s %13s  %s\n", "N_c", "u", "layout",
              "max/mean", "gc_bytes/rank", "x ring", "sources", "eff_ring_W", "eff_gc_W",
              "hides_above_W", "schedule");
  for (const Row& r : rows) {
    if (r.blocks_skipped < 0) continue;  // plain Ulysses: no ring part
    std::printf("%6d %4d %-11s %9.3f %13.4g %9.5f %8d %10.4f %9.4f %13.4g  %s\n", r.n_c, r.u,
                r.layout.c_str(), r.gc_max_over_mean, r.gc_bytes, r.gc_over_ring, r.gc_sources,
                r.eff_ring_w, r.eff_gc_w, r.gc_hide_bw,
                r.gc_fallback ? "ring (the busiest rank would move every block)" : "groupcast");
  }
  if (o.csv.empty()) return;
  std::ofstream f(o.csv);
  if (!f) throw UsageError("--csv: cannot write " + o.csv);
  f.precision(12);
  f << "docs,seed,causal,n_c,u,ring_degree,layout,s,c,documents,longest,padding_fraction,"
       "work_max_over_mean,lockstep_blocks,pred_efficiency_lockstep,pred_efficiency_balance,"
       "bytes_per_rank,blocks_skipped,blocks_masked,flops,bw,eff_ring_w,groupcast_falls_back,"
       "groupcast_work_max_over_mean,groupcast_bytes_per_rank,groupcast_over_ring,"
       "groupcast_sources,eff_groupcast_w,groupcast_hides_above_bw\n";
  for (const Row& r : rows)
    f << '"' << spec.text << "\"," << o.seed << ',' << (o.causal ? 1 : 0) << ',' << r.n_c << ','
      << r.u << ',' << r.ring_degree << ',' << r.layout << ',' << r.s << ',' << r.c << ','
      << r.documents << ',' << r.longest << ',' << r.padding << ',' << r.max_over_mean << ','
      << r.lockstep_blocks << ',' << r.eff_ring << ',' << r.eff_allgather << ',' << r.bytes << ','
      << r.blocks_skipped << ',' << r.blocks_masked << ',' << o.flops << ',' << o.bw << ','
      << r.eff_ring_w << ',' << (r.gc_fallback ? 1 : 0) << ',' << r.gc_max_over_mean << ','
      << r.gc_bytes << ',' << r.gc_over_ring << ',' << r.gc_sources << ',' << r.eff_gc_w << ','
      << r.gc_hide_bw << '\n';
}

}  // namespace suite::model_cli

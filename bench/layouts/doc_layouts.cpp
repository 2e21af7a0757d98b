#include "bench/layouts/doc_layouts.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/harness/errors.hpp"

namespace suite::ring {
std::vector<Segment> segments_of_runs(std::vector<std::pair<std::int64_t, std::int64_t>> runs,
                                      const PackedDocuments& docs) {
  std::sort(runs.begin(), runs.end());
  std::vector<Segment> out;
  std::int64_t local = 0;
  for (const auto& [start, count] : runs) {
    if (count <= 0) continue;
    if (!out.empty() && out.back().start + out.back().count == start &&
        docs.document_of(start - 1) == docs.document_of(start))
      out.back().count += count;
    else
      out.push_back({local, start, 1, count});
    local += count;
  }
  return out;
}

std::int64_t query_work(const PackedDocuments& docs, std::int64_t d, std::int64_t a, std::int64_t b,
                        bool causal) {
  if (b <= a) return 0;
  if (!causal) return (b - a) * docs.length(d);
  const std::int64_t lo = a - docs.start(d) + 1, hi = b - docs.start(d);  // 1-based in the doc
  return (lo + hi) * (hi - lo + 1) / 2;
}

std::vector<std::int64_t> slot_positions(const RankLayout& layout) {
  std::vector<std::int64_t> pos;
  for (const Segment& s : layout.slots)
    for (std::int64_t i = 0; i < s.count; ++i)
      pos.push_back(s.position(i));
  return pos;
}

RankLayout doc_zigzag_layout(const PackedDocuments& docs, int rank, int n_c) {
  const std::int64_t chunks = 2 * static_cast<std::int64_t>(n_c);
  if (docs.pad_to() % chunks != 0)
    throw std::logic_error("doc_zigzag: documents must be padded to a multiple of 2 n_c");
  RankLayout out;
  std::int64_t local = 0;
  for (std::int64_t d = 0; d < docs.count(); ++d) {
    const std::int64_t h = (docs.slot_end(d) - docs.start(d)) / chunks;
    for (std::int64_t j : {static_cast<std::int64_t>(rank), chunks - 1 - rank}) {
      const std::int64_t cs = docs.start(d) + j * h;
      if (!out.slots.empty() && out.slots.back().start + out.slots.back().count == cs)
        out.slots.back().count += h;
      else
        out.slots.push_back({local, cs, 1, h});
      const std::int64_t a = std::max(cs, docs.start(d)), b = std::min(cs + h, docs.end(d));
      if (b > a) {
        if (!out.tokens.empty() && out.tokens.back().start + out.tokens.back().count == a &&
            out.tokens.back().local_offset + out.tokens.back().count == local + (a - cs))
          out.tokens.back().count += b - a;
        else
          out.tokens.push_back({local + (a - cs), a, 1, b - a});
      }
      local += h;
    }
  }
  return out;
}

std::vector<RankLayout> document_layout(Layout l, const PackedDocuments& docs, int n_c,
                                        std::int64_t c, bool causal, std::int64_t balanced_chunk,
                                        BalanceTarget target) {
  std::vector<RankLayout> out;
  if (l == Layout::doc_zigzag) {
    for (int r = 0; r < n_c; ++r)
      out.push_back(doc_zigzag_layout(docs, r, n_c));
    return out;
  }
  if (l == Layout::balanced) return balanced_layout(docs, n_c, c, causal, balanced_chunk, target);
  throw std::logic_error("document_layout: " + std::string(layout_name(l)) +
                         " is not a document layout");
}

}  // namespace suite::ring

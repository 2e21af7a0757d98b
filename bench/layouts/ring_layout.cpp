#include "bench/layouts/ring_layout.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/harness/errors.hpp"

namespace suite::ring {

using kernels::BlockMask;

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::zigzag:
      return "zigzag";
    case Layout::striped:
      return "striped";
    case Layout::doc_zigzag:
      return "doc_zigzag";
    case Layout::balanced:
      return "balanced";
  }
  return "?";
}

bool is_document_layout(Layout l) {
  return l == Layout::doc_zigzag || l == Layout::balanced;
}

std::optional<Layout> parse_layout(std::string_view s) {
  for (Layout l :
       {Layout::contiguous, Layout::zigzag, Layout::striped, Layout::doc_zigzag, Layout::balanced})
    if (s == layout_name(l)) return l;
  return std::nullopt;
}

void validate_layout(Layout l, std::int64_t c, int n_c) {
  if (c < 1)
    throw UsageError("block size c must be >= 1 token per rank (got " + std::to_string(c) + ")");
  if (n_c < 1) throw UsageError("the context-parallel group needs at least one rank");
  if ((l == Layout::zigzag || l == Layout::doc_zigzag) && c % 2 != 0)
    throw UsageError(
        "--layout " + std::string(layout_name(l)) +
        " needs an even block size c (two chunks of c/2 per rank); got c = " + std::to_string(c));
}

std::vector<Segment> rank_segments(Layout l, int rank, int n_c, std::int64_t c) {
  switch (l) {
    case Layout::contiguous:
      return {{0, rank * c, 1, c}};
    case Layout::zigzag: {
      const std::int64_t half = c / 2;
      return {{0, rank * half, 1, half}, {half, (2 * n_c - 1 - rank) * half, 1, half}};
    }
    case Layout::striped:
      return {{0, rank, n_c, c}};
    case Layout::doc_zigzag:
    case Layout::balanced:
      break;
  }
  throw std::logic_error("rank_segments: layout " + std::string(layout_name(l)) +
                         " is defined by its documents (doc_layouts.hpp)");
}

std::vector<std::int64_t> rank_positions(Layout l, int rank, int n_c, std::int64_t c) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(c));
  for (const Segment& s : rank_segments(l, rank, n_c, c))
    for (std::int64_t i = 0; i < s.count; ++i)
      pos[static_cast<std::size_t>(s.local_offset + i)] = s.position(i);
  return pos;
}

std::optional<BlockMask> classify_pair(const Segment& q, const Segment& k, bool causal) {
  if (q.count == 0 || k.count == 0) return std::nullopt;
  if (!causal || k.last() <= q.first()) return BlockMask::full;
  if (k.first() > q.last()) return std::nullopt;
  // Same stride and length, keys starting up to one stride before the queries: key i' is
  // visible to query i iff i' <= i (for stride 1 that is the identical range).
  if (q.stride == k.stride && q.count == k.count && k.start <= q.start &&
      q.start - k.start < q.stride)
    return BlockMask::causal_top_left;
  // Contiguous ranges ending together: query i sees keys up to i + (ck - cq).
  if (q.stride == 1 && k.stride == 1 && q.last() == k.last()) return BlockMask::causal_bottom_right;
  return BlockMask::positions;
}

namespace {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return -floor_div(-a, b);
}

// Index range [lo, hi) of segment s's tokens with positions in [a, b).
std::pair<std::int64_t, std::int64_t> index_range(const Segment& s, std::int64_t a,
                                                  std::int64_t b) {
  const std::int64_t lo = std::max<std::int64_t>(0, ceil_div(a - s.start, s.stride));
  const std::int64_t hi = std::min(s.count, ceil_div(b - s.start, s.stride));
  return {lo, std::max(lo, hi)};
}

// Two segments of one stride S, their tokens restricted to positions [a, b): the pairs with
// key <= query (causal) or all of them. Key j <= query i iff j <= i + floor((q0 - k0) / S), so
// query i sees clamp(i + delta - j0 + 1, 0, J) keys, summed in O(1).
std::int64_t same_stride_pairs(const Segment& q, const Segment& k, bool causal, std::int64_t a,
                               std::int64_t b) {
  const auto [i0, i1] = index_range(q, a, b);
  const auto [j0, j1] = index_range(k, a, b);
  if (i1 <= i0 || j1 <= j0) return 0;
  if (!causal) return (i1 - i0) * (j1 - j0);
  const std::int64_t off = floor_div(q.start - k.start, q.stride) - j0 + 1;
  return kernels::clamped_prefix_sum(i1 - 1 + off, j1 - j0) -
         kernels::clamped_prefix_sum(i0 - 1 + off, j1 - j0);
}

}  // namespace

std::int64_t visible_pairs(const Segment& q, const Segment& k, bool causal) {
  if (!causal) return q.count * k.count;
  if (q.count == 0 || k.count == 0) return 0;
  if (q.stride == k.stride)  // stride 1: query i sees min(count, start_q + i - start_k + 1)
    return same_stride_pairs(q, k, causal, std::min(q.first(), k.first()),
                             std::max(q.last(), k.last()) + 1);
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < q.count; ++i) {
    const std::int64_t p = q.position(i);
    if (p < k.first()) continue;
    // Keys k.start + j * k.stride <= p  <=>  j <= (p - k.start) / k.stride.
    n += std::min(k.count, (p - k.start) / k.stride + 1);
  }
  return n;
}

namespace {

// Keys of segment k with positions in [lo, hi].
std::int64_t keys_between(const Segment& k, std::int64_t lo, std::int64_t hi) {
  if (k.count == 0 || hi < lo || hi < k.first() || lo > k.last()) return 0;
  const std::int64_t j_lo = lo <= k.start ? 0 : (lo - k.start + k.stride - 1) / k.stride;
  const std::int64_t j_hi = std::min(k.count - 1, (hi - k.start) / k.stride);
  return std::max<std::int64_t>(0, j_hi - j_lo + 1);
}

}  // namespace

std::int64_t visible_pairs(const Segment& q, const Segment& k, bool causal,
                           const PackedDocuments* docs) {
  if (docs == nullptr) return visible_pairs(q, k, causal);
  if (q.count == 0 || k.count == 0) return 0;
  std::int64_t n = 0;
  if (q.stride == 1 && k.stride == 1) {
    // Per document the query segment spans: its queries against its keys, as one undivided
    // pair of runs.
    for (std::int64_t d = docs->document_of(q.first()); d <= docs->document_of(q.last()); ++d) {
      const std::int64_t qa = std::max(q.first(), docs->start(d));
      const std::int64_t qb = std::min(q.last() + 1, docs->end(d));
      const std::int64_t ka = std::max(k.first(), docs->start(d));
      const std::int64_t kb = std::min(k.last() + 1, docs->end(d));
      if (qb <= qa || kb <= ka) continue;
      n += visible_pairs(Segment{0, qa, 1, qb - qa}, Segment{0, ka, 1, kb - ka}, causal);
    }
    return n;
  }
  if (q.stride == k.stride) {  // striped: per document they share, in O(1)
    const std::int64_t d0 = std::max(docs->document_of(q.first()), docs->document_of(k.first()));
    const std::int64_t d1 = std::min(docs->document_of(q.last()), docs->document_of(k.last()));
    for (std::int64_t d = d0; d <= d1; ++d)
      n += same_stride_pairs(q, k, causal, docs->start(d), docs->end(d));
    return n;
  }
  for (std::int64_t i = 0; i < q.count; ++i) {
    const std::int64_t p = q.position(i), d = docs->document_of(p);
    n += keys_between(k, docs->start(d), causal ? p : docs->end(d) - 1);
  }
  return n;
}

std::pair<std::int64_t, std::int64_t> key_window(const Segment& q, bool causal,
                                                 const PackedDocuments* docs, std::int64_t s) {
  const std::int64_t lo = docs ? docs->start(docs->document_of(q.first())) : 0;
  const std::int64_t hi = causal ? q.last()
                          : docs ? docs->end(docs->document_of(q.last())) - 1
                                 : s - 1;
  return {lo, hi};
}

std::optional<BlockMask> classify_pair(const Segment& q, const Segment& k, bool causal,
                                       const PackedDocuments* docs) {
  if (docs == nullptr) return classify_pair(q, k, causal);
  if (visible_pairs(q, k, causal, docs) == 0) return std::nullopt;
  const std::int64_t d = docs->document_of(q.first());
  if (docs->document_of(q.last()) == d && docs->document_of(k.first()) == d &&
      docs->document_of(k.last()) == d)
    return classify_pair(q, k, causal);  // one document: the structure of the plain mask
  return BlockMask::positions;
}

}  // namespace suite::ring

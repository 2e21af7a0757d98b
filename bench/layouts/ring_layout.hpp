// Which global tokens each rank of a context-parallel group holds (METHODS.md section 2), and
// what the causal mask looks like between two ranks' blocks. Pure arithmetic: the ring, the
// all-gather variant, Ulysses' hybrid and the tests all derive work and masks from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/layouts/packed_documents.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

enum class Layout {
  contiguous,  // rank r holds tokens [r c, (r+1) c)
  zigzag,      // 2 N_c chunks of c/2: rank r holds chunks r and 2 N_c - 1 - r
  striped,     // token i on rank i mod N_c
  // Packed documents only (--docs; doc_layouts.hpp):
  doc_zigzag,  // each document padded to a multiple of 2 N_c, zig-zag within it (TE's THD rule)
  balanced,    // document chunks placed so every rank's exact work is as equal as can be
};

// Whether a layout is defined over packed documents (and needs them).
bool is_document_layout(Layout l);

std::string_view layout_name(Layout l);
std::optional<Layout> parse_layout(std::string_view s);

// A run of a rank's local tokens: local rows [local_offset, local_offset + count) hold the
// global positions start, start + stride, ..., start + (count - 1) stride.
struct Segment {
  std::int64_t local_offset = 0;
  std::int64_t start = 0;
  std::int64_t stride = 1;
  std::int64_t count = 0;
  std::int64_t position(std::int64_t i) const { return start + i * stride; }
  std::int64_t first() const { return start; }
  std::int64_t last() const { return start + (count - 1) * stride; }
};

// Throws UsageError when c tokens per rank cannot be laid out that way on n_c ranks (zig-zag
// needs an even c) or c, n_c < 1.
void validate_layout(Layout l, std::int64_t c, int n_c);

// The segments of `rank` (one for contiguous and striped, two for zig-zag), in local order.
std::vector<Segment> rank_segments(Layout l, int rank, int n_c, std::int64_t c);
// Global positions of rank's c local tokens, in local order.
std::vector<std::int64_t> rank_positions(Layout l, int rank, int n_c, std::int64_t c);

// The mask between a query segment and a key segment: nullopt when no key is visible to any
// query (the pair is skipped), else the structure a vendor kernel can express (full, causal
// top-left, causal bottom-right) or `positions` when only positions describe it.
std::optional<kernels::BlockMask> classify_pair(const Segment& q, const Segment& k, bool causal);

// Exact number of visible (query, key) pairs between two segments (key position <= query
// position when causal): O(1) for runs of consecutive positions, O(q.count) for strided ones.
std::int64_t visible_pairs(const Segment& q, const Segment& k, bool causal);

// The same with packed documents (docs may be null: none): nothing crosses a document's
// boundary, so a pair is skipped when no query-key pair shares a document, keeps its structure
// when both segments lie in one document, and is a `positions` mask otherwise. The count runs
// in O(documents the query segment spans) for consecutive runs, O(q.count log documents) for
// strided ones.
std::optional<kernels::BlockMask> classify_pair(const Segment& q, const Segment& k, bool causal,
                                                const PackedDocuments* docs);
std::int64_t visible_pairs(const Segment& q, const Segment& k, bool causal,
                           const PackedDocuments* docs);

// The positions [lo, hi] a key run must overlap to hold a key visible to some query of the
// consecutive run q: from the start of q's first document (0 without documents) to q's last
// position (causal) or the end of its last document (s - 1 without documents).
std::pair<std::int64_t, std::int64_t> key_window(const Segment& q, bool causal,
                                                 const PackedDocuments* docs, std::int64_t s);

// The rank whose K/V block `rank` holds in round `round` of the ring: (rank - round) mod n_c.
inline int ring_source(int rank, int round, int n_c) {
  return ((rank - round) % n_c + n_c) % n_c;
}

}  // namespace suite::ring

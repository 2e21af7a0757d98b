// Layouts defined over packed documents (--docs): per-document zig-zag (TransformerEngine's THD
// rule: every document padded to a multiple of 2 N_c and zig-zagged within itself) and the
// suite's work-balanced layout. Each gives every rank its slots (the positions its c rows of
// Q, K, V stand for, padding included) and the runs of tokens among them.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/ring_attention/packed_documents.hpp"
#include "bench/ring_attention/ring_layout.hpp"

namespace suite::ring {

struct RankLayout {
  std::vector<Segment> slots;   // cover local rows [0, c) in order
  std::vector<Segment> tokens;  // the tokens among them: what attention computes on
};

// Every rank's layout for a document layout (doc_zigzag needs docs packed with pad_to 2 n_c;
// balanced needs no padding). Throws UsageError where the documents cannot be laid out so.
std::vector<RankLayout> document_layout(Layout l, const PackedDocuments& docs, int n_c,
                                        std::int64_t c, bool causal);

// Rank r of doc_zigzag: for every document of P slots (a multiple of 2 n_c), its chunks r and
// 2 n_c - 1 - r of P / (2 n_c) slots each; the document's padding sits at its end.
RankLayout doc_zigzag_layout(const PackedDocuments& docs, int rank, int n_c);

// balanced: every document of at least 2 n_c tokens, or whose work alone exceeds a rank's share
// of round 0 (where a whole document's work falls), is cut into 2 n_c chunks whose sizes differ
// by at most one token, rank r taking chunks r and 2 n_c - 1 - r (mirrored, so every rank gets
// the same causal work of it, in every round: per-document zig-zag without padding); the others
// go whole, heaviest first, to the rank with the least work that has room, split only where no
// rank has room for all of one, and then over consecutive ranks (its cross-rank work in round 1,
// on the rank with the least of it so far). Every rank holds exactly c tokens, in two contiguous
// runs per cut document. O(documents x n_c), from the lengths alone.
std::vector<RankLayout> balanced_layout(const PackedDocuments& docs, int n_c, std::int64_t c,
                                        bool causal);

// The work of queries [a, b) of document d (a, b within its tokens) against every key: its
// visible pairs, sum of (p - start + 1) when causal, (b - a) L otherwise.
std::int64_t query_work(const PackedDocuments& docs, std::int64_t d, std::int64_t a, std::int64_t b,
                        bool causal);

// Global positions of a rank's c rows in local order (from its slots).
std::vector<std::int64_t> slot_positions(const RankLayout& layout);

}  // namespace suite::ring

// Layouts defined over packed documents (--docs): per-document zig-zag (TransformerEngine's THD
// rule: every document padded to a multiple of 2 N_c and zig-zagged within itself) and the
// suite's work-balanced layout. Each gives every rank its slots (the positions its c rows of
// Q, K, V stand for, padding included) and the runs of tokens among them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "bench/layouts/packed_documents.hpp"
#include "bench/layouts/ring_layout.hpp"

namespace suite::ring {

struct RankLayout {
  std::vector<Segment> slots;   // cover local rows [0, c) in order
  std::vector<Segment> tokens;  // the tokens among them: what attention computes on
};

// Runs (first position, tokens) in global order, merged where they touch within one
// document, as segments with local offsets.
std::vector<Segment> segments_of_runs(std::vector<std::pair<std::int64_t, std::int64_t>> runs,
                                      const PackedDocuments& docs);

// What balanced evens out: the ring's rounds (it waits for each round's busiest rank), or each
// rank's total for a schedule that waits once, at the end, and pays bytes for every document it
// cuts (the group-cast variant).
enum class BalanceTarget { ring_rounds, one_wait };

// Every rank's layout for a document layout (doc_zigzag needs docs packed with pad_to 2 n_c;
// balanced needs no padding; balanced_chunk: balanced_min_chunk's request). Throws UsageError
// where the documents cannot be laid out so.
std::vector<RankLayout> document_layout(Layout l, const PackedDocuments& docs, int n_c,
                                        std::int64_t c, bool causal,
                                        std::int64_t balanced_chunk = 0,
                                        BalanceTarget target = BalanceTarget::ring_rounds);

// Rank r of doc_zigzag: for every document of P slots (a multiple of 2 n_c), its chunks r and
// 2 n_c - 1 - r of P / (2 n_c) slots each; the document's padding sits at its end.
RankLayout doc_zigzag_layout(const PackedDocuments& docs, int rank, int n_c);

// The chunk balanced cuts documents into, at least, when it chooses how many ranks each goes
// over: `requested` (--balanced-chunk) when above 0, else 16 (c / 64 for c under 1K, at least
// 1). UsageError for a negative request.
std::int64_t balanced_min_chunk(std::int64_t c, std::int64_t requested);

// balanced (balanced_layout.cpp): planned against the ring's lockstep (the sum over rounds of
// each round's busiest rank), with every rank's visible pairs per round tracked as it places.
// Every document of 4 min_chunk tokens or more (balanced_min_chunk) is cut into 2g chunks of at
// least min_chunk tokens (fewer where a document longer than c or heavier than a rank's share
// needs more ranks; 4 where a level too sparse to even out its rounds moves up) over a group of
// g ranks, g a divisor of n_c, the group's ranks n_c / g apart; group rank i takes chunks i and
// 2g - 1 - i (mirrored: every pair of the group's ranks gets the same causal work of it, as
// per-document zig-zag, without padding), and all of them work on it in the same rounds, the
// multiples of n_c / g. The documents of each g are partitioned by work over its n_c / g group
// positions (heaviest first to the lightest, then swaps that narrow the heaviest and lightest
// positions' gap; where a position lacks room, the one that raises the rounds' peaks least). A
// document's L mod 2g extra tokens go to the group's ranks whose extra tokens so far weigh least
// (q pairs a round each), two to a rank at the ends of its chunks, or one to a rank in the
// document's middle where chunks hold 256 tokens or more. Documents too short to cut go whole,
// last, to the rank with room whose round 0 is lightest; where no rank has room for all of one,
// in pieces on consecutive ranks or mirrored over the ranks with the most room, whichever raises
// the peaks least. Every rank holds exactly c tokens, in runs of one document each. A few passes
// over the documents for n_c's divisors, then g^2 table cells per cut document (n_c g where its
// position lacks room) and n_c ranks per whole one, from the lengths alone.
// BalanceTarget::one_wait: a document is cut only where it must be (longer than c, or heavier
// than a rank's share of the pack's work), over the fewest ranks that hold it, a group of
// consecutive ranks (its K/V travels only inside the group: inside a node where g divides the
// node's ranks), mirrored as above; the rest stay whole; every rank's total work is what is
// evened out, not its rounds. requested_chunk plays no part there.
std::vector<RankLayout> balanced_layout(const PackedDocuments& docs, int n_c, std::int64_t c,
                                        bool causal, std::int64_t requested_chunk = 0,
                                        BalanceTarget target = BalanceTarget::ring_rounds);

// The work of queries [a, b) of document d (a, b within its tokens) against every key: its
// visible pairs, sum of (p - start + 1) when causal, (b - a) L otherwise.
std::int64_t query_work(const PackedDocuments& docs, std::int64_t d, std::int64_t a, std::int64_t b,
                        bool causal);

// Global positions of a rank's c rows in local order (from its slots).
std::vector<std::int64_t> slot_positions(const RankLayout& layout);

}  // namespace suite::ring

// Packed variable-length documents (--docs): the document lengths of one packed sequence,
// drawn from a distribution or read from a file, and where each token's document starts. The
// attention mask is causal (or full) within a document and nothing crosses a boundary: the
// kernels see it through tagged positions (kernels/attention/attention_index.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace suite::ring {

// fixed:L | uniform:MIN:MAX | lognormal:MEDIAN:SIGMA | pareto:MIN:ALPHA | file:PATH
struct DocSpec {
  enum class Kind { fixed, uniform, lognormal, pareto, file };
  Kind kind = Kind::fixed;
  double a = 0, b = 0;                // L | MIN, MAX | MEDIAN, SIGMA | MIN, ALPHA
  std::vector<std::int64_t> lengths;  // file: the lengths, in order
  std::string text;                   // as given, for the results
  // How balanced lays them out (--balanced-chunk): the chunk length it cuts documents into
  // where their lengths decide (kBalancedChunkHelp); 0: its default (balanced_min_chunk).
  std::int64_t balanced_chunk = 0;
  // The shortest document it can give: a sequence shorter than that cannot hold one.
  std::int64_t shortest() const;
};

// Throws UsageError (one message) for an unknown distribution, lengths below 1, a bad
// parameter, or a file that cannot be read or holds anything but positive integers.
DocSpec parse_doc_spec(const std::string& text);

extern const char* const kDocsHelp;
extern const char* const kBalancedChunkHelp;

class PackedDocuments {
 public:
  // Documents drawn from `spec` with `seed` (a file's lengths in order, from its first line
  // again when they run out) until s tokens are filled; the last one is cut at the sequence's
  // end (cut_tokens() says by how much). The same (spec, s, seed) gives the same pack on every
  // machine: the draws use mt19937_64 and closed-form transforms, no library distribution.
  // Throws UsageError when the sequence cannot hold one document of the spec's shortest length.
  // pad_to > 1 (per-document zig-zag, TransformerEngine's THD rule): each document occupies
  // its length rounded up to a multiple of pad_to slots, the rest of them padding (no token:
  // nothing attends to or from a pad slot); the s slots then hold fewer documents.
  static PackedDocuments pack(const DocSpec& spec, std::int64_t s, std::uint64_t seed,
                              std::int64_t pad_to = 1);
  // From explicit lengths (tests); they must sum to s.
  static PackedDocuments from_lengths(const std::vector<std::int64_t>& lengths);

  std::int64_t count() const { return static_cast<std::int64_t>(starts_.size()) - 1; }
  // Slots of the sequence (s), and the tokens among them (s less the padding).
  std::int64_t slots() const { return starts_.back(); }
  std::int64_t tokens() const { return slots() - pad_slots_; }
  std::int64_t pad_slots() const { return pad_slots_; }
  std::int64_t pad_to() const { return pad_to_; }
  // Document d's slots [start(d), slot_end(d)), its tokens [start(d), end(d)).
  std::int64_t start(std::int64_t doc) const { return starts_[static_cast<std::size_t>(doc)]; }
  std::int64_t slot_end(std::int64_t doc) const {
    return starts_[static_cast<std::size_t>(doc) + 1];
  }
  std::int64_t length(std::int64_t doc) const { return lengths_[static_cast<std::size_t>(doc)]; }
  std::int64_t end(std::int64_t doc) const { return start(doc) + length(doc); }
  bool is_pad(std::int64_t pos) const { return pos >= end(document_of(pos)); }
  // cu_seqlens (count() + 1 cumulative token counts, TransformerEngine's name) and
  // cu_seqlens_padded (the slot offsets; the same without padding).
  std::vector<std::int64_t> cu_seqlens() const;
  const std::vector<std::int64_t>& cu_seqlens_padded() const { return starts_; }
  // The positions of the tokens (every slot but the padding), in order.
  std::vector<std::int64_t> token_positions() const;
  std::int64_t longest() const;
  // Tokens the last drawn document lost to the sequence's end.
  std::int64_t cut_tokens() const { return cut_; }
  // The document holding global position `pos` (0 <= pos < tokens()).
  std::int64_t document_of(std::int64_t pos) const;
  // Positions tagged with their documents, as the kernels read them (a pad slot belongs to no
  // document: kernels::kNoDocument, visible to no query).
  std::vector<std::int64_t> tagged(const std::vector<std::int64_t>& positions) const;
  // Visible (query, key) pairs of the whole sequence: sum of L(L+1)/2 (causal) or L^2.
  std::int64_t total_visible_pairs(bool causal) const;

 private:
  std::vector<std::int64_t> starts_{0}, lengths_;
  std::int64_t cut_ = 0, pad_slots_ = 0, pad_to_ = 1;
};

}  // namespace suite::ring

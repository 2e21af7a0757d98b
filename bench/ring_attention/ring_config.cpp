#include "bench/ring_attention/ring_config.hpp"

#include <cctype>

#include "common/harness/errors.hpp"

namespace suite::ring {

std::string_view variant_name(Variant v) {
  switch (v) {
    case Variant::ring:
      return "ring";
    case Variant::allgather:
      return "allgather";
    case Variant::groupcast:
      return "groupcast";
  }
  return "?";
}

std::int64_t RingConfig::six_block_bytes() const {
  return static_cast<std::int64_t>(elem()) * (2 * c * q_row() + 2 * kv_block_elems());
}

std::string RingConfig::case_name() const {
  std::string n = std::string(variant_name(variant)) + "_" + std::string(layout_name(layout)) +
                  (causal ? "_causal" : "_full") + "_" + std::string(dtype_name(dtype)) + "_c" +
                  std::to_string(c) + "_a" + std::to_string(heads);
  if (kv_heads != heads) n += "_kv" + std::to_string(kv_heads);
  n += "_d" + std::to_string(head_dim);
  if (batch != 1) n += "_b" + std::to_string(batch);
  if (backward()) n += "_fwd_bwd_g" + std::string(dtype_name(grad_dtype));
  if (docs) n += docs_name_suffix(docs_spec);
  return n;
}

std::string docs_name_suffix(const std::string& docs_spec) {
  if (docs_spec.empty()) return {};
  std::string spec = docs_spec.substr(0, docs_spec.find(':'));
  for (char ch : docs_spec.substr(spec.size()))
    spec += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ? ch : '-';
  if (spec.rfind("file-", 0) == 0) spec = "file-" + spec.substr(spec.find_last_of('-') + 1);
  return "_docs-" + spec;
}

void attach_documents(RingConfig& cfg, const DocSpec& spec, std::uint64_t seed) {
  const std::int64_t pad_to = cfg.layout == Layout::doc_zigzag ? 2 * cfg.n_c : 1;
  cfg.docs_spec = spec.text;
  cfg.docs =
      std::make_shared<const PackedDocuments>(PackedDocuments::pack(spec, cfg.s(), seed, pad_to));
  cfg.doc_layout.reset();
  // doc_zigzag derives any rank's layout from the documents alone (rank_layout); balanced is
  // planned once for all ranks.
  if (cfg.layout == Layout::balanced)
    cfg.doc_layout = std::make_shared<const std::vector<RankLayout>>(document_layout(
        cfg.layout, *cfg.docs, cfg.n_c, cfg.c, cfg.causal, spec.balanced_chunk,
        cfg.variant == Variant::groupcast ? BalanceTarget::one_wait : BalanceTarget::ring_rounds));
}

namespace {

// Rank r's layout under a document layout: balanced's from the plan (no copy), doc_zigzag's
// derived into `derived`.
const RankLayout& rank_layout(const RingConfig& cfg, int rank, RankLayout& derived) {
  if (cfg.doc_layout) return (*cfg.doc_layout)[static_cast<std::size_t>(rank)];
  SUITE_CHECK(cfg.docs, "a document layout without documents (attach_documents first)");
  derived = doc_zigzag_layout(*cfg.docs, rank, cfg.n_c);
  return derived;
}

}  // namespace

void validate(const RingConfig& cfg) {
  if (cfg.head_dim != 64 && cfg.head_dim != 128)
    throw UsageError("--head-dim " + std::to_string(cfg.head_dim) +
                     " is not supported by the attention kernels (64 or 128)");
  if (cfg.heads < 1 || cfg.kv_heads < 1 || cfg.heads % cfg.kv_heads != 0)
    throw UsageError("--heads " + std::to_string(cfg.heads) +
                     " must be a positive multiple of --kv-heads " + std::to_string(cfg.kv_heads));
  if (cfg.batch < 1) throw UsageError("--batch must be >= 1");
  validate_layout(cfg.layout, cfg.c, cfg.n_c);
  if (is_document_layout(cfg.layout) && !cfg.docs)
    throw UsageError("--layout " + std::string(layout_name(cfg.layout)) +
                     " lays out packed documents: give --docs");
}

void validate_variant_backend(Variant v, Backend backend) {
  if (v == Variant::groupcast && backend != Backend::cpu)
    throw UsageError(
        "--variant groupcast runs on the cpu backend (its messages are MPI's on host buffers; "
        "the cuda backend would stage them, which it does not yet)");
}

std::vector<Segment> token_segments(const RingConfig& cfg, int rank) {
  RankLayout derived;
  if (is_document_layout(cfg.layout)) return rank_layout(cfg, rank, derived).tokens;
  return rank_segments(cfg.layout, rank, cfg.n_c, cfg.c);
}

std::vector<std::int64_t> row_positions(const RingConfig& cfg, int rank) {
  RankLayout derived;
  if (is_document_layout(cfg.layout)) return slot_positions(rank_layout(cfg, rank, derived));
  return rank_positions(cfg.layout, rank, cfg.n_c, cfg.c);
}

}  // namespace suite::ring

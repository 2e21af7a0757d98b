#include "bench/ring_attention/sweep_flags.hpp"

#include "bench/layouts/packed_documents.hpp"
#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"

namespace suite::ring {
Layout parse_layout_name(const std::string& item) {
  const std::optional<Layout> layout = parse_layout(item);
  if (!layout)
    throw UsageError("--layout: unknown value '" + item +
                     "' (contiguous, zigzag, striped; with --docs also doc_zigzag, balanced)");
  return *layout;
}

void add_layout_flag(CLI::App& app, std::string& layouts) {
  app.add_option("--layout", layouts,
                 "token layouts, comma-separated: contiguous (rank r holds [rc, (r+1)c)), zigzag "
                 "(chunks r and 2N_c-1-r of c/2; needs even c), striped (token i on rank i mod "
                 "N_c); with --docs also doc_zigzag (each document cut into 2N_c chunks, zig-zag, "
                 "padded to a multiple of 2N_c as TransformerEngine's THD layout) and balanced "
                 "(document chunks placed so that every rank's visible pairs per round are as "
                 "equal as the documents allow; --balanced-chunk). In a Ulysses x ring hybrid "
                 "(ulysses, mesh --cp-method hybrid:U) the layout of its ring part, ignored where "
                 "u = N_c; model --section varlen compares them")
      ->capture_default_str();
}

void add_docs_flag(CLI::App& app, std::string& docs) {
  app.add_option("--docs", docs, kDocsHelp);
}

void add_kv_heads_flag(CLI::App& app, int& kv_heads) {
  app.add_option("--kv-heads", kv_heads,
                 "n_kv: K/V heads (GQA: a multiple of it must be a; only these travel; with --tp, "
                 "at least T: each TP rank holds whole K/V heads); 0 = heads")
      ->capture_default_str();
}

void add_head_dim_flag(CLI::App& app, int& head_dim) {
  app.add_option("--head-dim", head_dim, "d: head dimension (64 or 128)")->capture_default_str();
}

void add_balanced_chunk_flag(CLI::App& app, std::int64_t& chunk) {
  app.add_option("--balanced-chunk", chunk, kBalancedChunkHelp)
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
}

}  // namespace suite::ring

// One ring-attention case: block size, layout, variant, heads and element type on a
// context-parallel group of n_c ranks, with the sizes every other part derives from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "bench/layouts/doc_layouts.hpp"
#include "bench/layouts/ring_layout.hpp"
#include "common/harness/pass_list.hpp"
#include "common/sim/sim.hpp"
#include "kernels/core/dtype.hpp"

namespace suite::ring {

enum class Variant {
  ring,       // K/V blocks travel around the ring, overlapped with attention
  allgather,  // all K/V gathered once (exposed), then one local attention (Llama 3)
  // Each rank's K/V rows sent directly to the ranks whose queries see them, and only those;
  // the next sources' rows arrive while this one's are used; dK/dV partial sums go back to
  // their owners the same way (group_cast.hpp; MagiAttention's group-cast and group-reduce)
  groupcast,
};

std::string_view variant_name(Variant v);

// The attention's shape, one type for every method and sweep that computes it: a query heads,
// n_kv K/V heads (GQA; a multiple of n_kv is a), head dimension d, b sequences.
struct AttentionShape {
  int heads = 8, kv_heads = 8, head_dim = 64;
  std::int64_t batch = 1;
};

struct RingConfig : AttentionShape {
  std::int64_t c = 0;  // tokens per rank
  int n_c = 1;         // context-parallel degree (ranks in the group)
  Layout layout = Layout::contiguous;
  Variant variant = Variant::ring;
  bool causal = true;
  DType dtype = DType::fp32;
  // CPU backend: poll the transport between attention tiles so the transfer moves during
  // compute (off only to show what happens without it). Off by default under SMPI, which
  // moves a transfer in simulated time by itself: there a poll only cuts the compute burst
  // SMPI measures (executed compute, 4 flat ranks, 25 GB/s, packed lognormal:256:1 documents:
  // balanced blocks ran at 0.61 of the ideal's pairs per second with polls, 0.80 without;
  // overlap on a 64 MB/s link unchanged, the step 0.72 and 0.69 of compute + transfer).
  bool poll_progress = !sim::kSmpiBuild;
  // Packed documents, ring variant: one kernel call per query range and ring block over the
  // document-tagged positions (the kernel splits at document boundaries itself, as a varlen
  // kernel's cu_seqlens call does), merged once per range and round, instead of one call per
  // (query run, key run) pair of one document, each merged (--varlen-calls; ring_cases sets it
  // only for the ring variant with documents and executed compute). The CPU kernels skip what no
  // query sees; the vendor kernels express only the structured masks of the per-pair calls. A
  // padding slot may then be a key (kernels::kNoDocument: weight 0, so its V must be finite, as
  // the drawn inputs are), never a query.
  bool block_calls = false;
  // fwd_bwd: each step is the forward then the backward (METHODS.md section 5).
  Pass pass = Pass::fwd;
  // Element type of the dK/dV partial sums that travel with the K/V blocks (--grad-dtype).
  DType grad_dtype = DType::fp32;
  // Packed documents over the s tokens (--docs), the same for every sequence of the batch;
  // null: one document. The mask is `causal` (or full) within each document.
  std::shared_ptr<const PackedDocuments> docs;
  std::string docs_spec;  // as given
  // Every rank's rows and token runs under balanced, planned once. doc_zigzag keeps none: any
  // rank's runs follow from the documents in O(documents), and all of them, held by each of
  // 512 simulated ranks in one process, came to about 60 GB.
  std::shared_ptr<const std::vector<RankLayout>> doc_layout;

  const PackedDocuments* documents() const { return docs.get(); }

  bool backward() const { return pass == Pass::fwd_bwd; }
  std::size_t grad_elem() const { return dtype_size(grad_dtype); }
  std::int64_t s() const { return c * n_c; }
  int group() const { return heads / kv_heads; }
  std::int64_t q_row() const { return batch * heads * head_dim; }      // elements per token
  std::int64_t kv_row() const { return batch * kv_heads * head_dim; }  // per token, K or V
  // One travelling block: K and V of c tokens, packed [K | V].
  std::int64_t kv_block_elems() const { return 2 * c * kv_row(); }
  std::size_t elem() const { return dtype_size(dtype); }
  // The six blocks of METHODS.md: Q, K, V, incoming K and V, O.
  std::int64_t six_block_bytes() const;
  std::string case_name() const;
};

// Throws UsageError for what the method cannot run: head counts, head dim, layout constraints.
void validate(const RingConfig& cfg);
// Throws UsageError for a variant the backend cannot run: the group-cast's messages are MPI's
// on host buffers (the cpu backend, and simulated clusters).
void validate_variant_backend(Variant v, Backend backend);

// Packs the documents of `spec` over cfg's s tokens with `seed` (per-document zig-zag pads every
// document to a multiple of 2 N_c) and, for a document layout, lays them out on the ranks
// (balanced: for the ring's rounds, or for one wait under the group-cast variant).
// Throws UsageError where the sequence or the layout cannot hold them.
void attach_documents(RingConfig& cfg, const DocSpec& spec, std::uint64_t seed);

// "_docs-<spec>" as a case name can hold it (file: the file's name); "" without documents.
std::string docs_name_suffix(const std::string& docs_spec);

// Rank r's runs of tokens (what attention computes on) and the global positions of its c rows
// in local order (padding slots included), whatever the layout.
std::vector<Segment> token_segments(const RingConfig& cfg, int rank);
std::vector<std::int64_t> row_positions(const RingConfig& cfg, int rank);

}  // namespace suite::ring

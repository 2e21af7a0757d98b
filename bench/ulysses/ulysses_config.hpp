// One DeepSpeed-Ulysses case (METHODS.md section 3): s tokens over a context-parallel group of
// n_c ranks, Ulysses inside groups of u consecutive ranks and ring attention across the
// n_c / u groups (u = n_c: plain Ulysses; u = 1: plain ring).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/ring_attention/ring_config.hpp"

namespace suite::ulysses {

struct UlyssesConfig : ring::AttentionShape {
  std::int64_t s = 0;                              // whole sequence
  int n_c = 1;                                     // context-parallel group size
  int u = 1;                                       // Ulysses degree
  ring::Layout layout = ring::Layout::contiguous;  // of the ring across Ulysses groups
  // How the ring part moves K/V: the ring's hops, or the group-cast (only the rows each query
  // sees, straight from their owner).
  ring::Variant ring_variant = ring::Variant::ring;
  bool causal = true;
  bool kv_replicate = false;
  DType dtype = DType::fp32;
  Pass pass = Pass::fwd;           // fwd_bwd: forward then backward
  DType grad_dtype = DType::fp32;  // the ring part's travelling dK/dV partial sums
  // Packed documents over the s tokens (--docs) and, under a document layout, the ring part's
  // layout of them over the n_c / u groups (set by attach_documents; null: one document).
  std::shared_ptr<const ring::PackedDocuments> docs;
  std::string docs_spec;
  std::shared_ptr<const std::vector<ring::RankLayout>> doc_layout;

  bool backward() const { return pass == Pass::fwd_bwd; }

  std::int64_t tokens_per_rank() const { return s / n_c; }         // t
  int ring_degree() const { return n_c / u; }                      // G
  std::int64_t group_tokens() const { return s / ring_degree(); }  // C = u t
  int heads_per_rank() const { return heads / u; }
  // K/V heads a rank attends with: n_kv / u, or one replicated head beyond the limit.
  int kv_heads_per_rank() const { return kv_heads >= u ? kv_heads / u : 1; }
  bool replicating() const { return kv_heads < u; }
  // The ring attention the hybrid runs across groups (n_c = G, c = C, a/u heads).
  ring::RingConfig ring_config() const;
  std::string case_name() const;
};

// Throws UsageError for what the method cannot run, naming the limit.
void validate(const UlyssesConfig& cfg);

// Packs `spec`'s documents over the s tokens and lays them out for the ring part (its layout
// over n_c / u groups of u t tokens: every member of a group holds t consecutive of its rows).
void attach_documents(UlyssesConfig& cfg, const ring::DocSpec& spec, std::uint64_t seed);

}  // namespace suite::ulysses

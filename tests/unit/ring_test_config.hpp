// The ring configurations the ring work and group-cast tests pose, and the tokens a rank holds
// under one: the brute-force side of those tests.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/layouts/packed_documents.hpp"
#include "bench/ring_attention/ring_config.hpp"

namespace suite::ring {

// n_c ranks of c tokens in layout l, with documents packed from `spec` by `seed` (one
// sequence when spec is null).
inline RingConfig test_config(Layout l, int n_c, std::int64_t c, bool causal, const char* spec,
                              std::uint64_t seed, Variant v = Variant::ring) {
  RingConfig cfg;
  cfg.layout = l;
  cfg.n_c = n_c;
  cfg.c = c;
  cfg.causal = causal;
  cfg.variant = v;
  if (spec) attach_documents(cfg, parse_doc_spec(spec), seed);
  return cfg;
}

// The global positions of rank's tokens, in local order.
inline std::vector<std::int64_t> tokens_of(const RingConfig& cfg, int rank) {
  std::vector<std::int64_t> out;
  for (const Segment& s : token_segments(cfg, rank))
    for (std::int64_t i = 0; i < s.count; ++i)
      out.push_back(s.position(i));
  return out;
}

}  // namespace suite::ring

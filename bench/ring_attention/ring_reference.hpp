// The check of a context-parallel attention result: full attention over the whole sequence
// for this rank's queries, computed on the host in double from the same inputs (drawn again by
// global position and rounded to the run's element type), compared with what the method got.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/ring_attention/ring_config.hpp"

namespace suite::ring {

struct ReferenceComparison {
  bool skipped = false;
  std::string why_skipped;
  double max_err_o = 0;    // largest |o - o_ref|
  double max_err_lse = 0;  // largest |lse - lse_ref| / (1 + |lse_ref|)
};

// Tolerance on both errors for the run's element type.
double reference_tolerance(DType t);

// positions: of the local tokens; segments: runs of local tokens (local_offset, count) that
// define the lse layout; o: [c, batch, heads, d] in local token order; lse: per (batch, segment)
// [heads, count] blocks at offset (batch * c + segment.local_offset) * heads. Skipped (with the
// reason) when the reference would take more than a few seconds or gigabytes on the host.
ReferenceComparison compare_with_full_attention(const RingConfig& cfg, std::uint64_t seed,
                                                const std::vector<Segment>& segments,
                                                const std::vector<std::int64_t>& positions,
                                                const std::vector<double>& o,
                                                const std::vector<double>& lse);

// The backward's check: dQ of this rank's queries and dK, dV of its own keys against the full
// sequence's attention backward on the host in double (forward for lse and o, then the
// gradients of sum(dO o), dO drawn by global position as the run draws it). Errors are
// relative to the largest reference value of each tensor.
struct GradientComparison {
  bool skipped = false;
  std::string why_skipped;
  double max_err_dq = 0, max_err_dk = 0, max_err_dv = 0;
  double max_err() const;
};

// Tolerance on those relative errors: the storage type's, or bf16's when the partial sums
// travel in bf16.
double gradient_tolerance(DType storage, DType grad);

// dq: [c, batch, heads, d] in local token order; dkv: this rank's [dK | dV] block, each
// [c, batch, kv_heads, d] in local token order.
GradientComparison compare_gradients_with_full_attention(const RingConfig& cfg, std::uint64_t seed,
                                                         const std::vector<std::int64_t>& positions,
                                                         const std::vector<double>& dq,
                                                         const std::vector<double>& dkv);

}  // namespace suite::ring

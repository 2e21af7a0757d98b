// The brute-force side of the layout tests: every (query segment, key segment) pair of a
// layout's ranks, and the (query, key) token pairs of two segments that a predicate admits.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "bench/layouts/ring_layout.hpp"

namespace suite::ring {

// Calls fn(causal, r, src, q, k) for each segment q of rank r and each segment k of rank src,
// for both causal and not; stops at the first fatal failure, as the loops in a test would.
template <class Fn>
void for_each_segment_pair(Layout layout, int n_c, std::int64_t c, Fn&& fn) {
  for (bool causal : {false, true})
    for (int r = 0; r < n_c; ++r)
      for (int src = 0; src < n_c; ++src)
        for (const Segment& q : rank_segments(layout, r, n_c, c))
          for (const Segment& k : rank_segments(layout, src, n_c, c)) {
            fn(causal, r, src, q, k);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

// How many (query, key) token pairs of q and k have visible(query position, key position).
template <class Visible>
std::int64_t brute_force_pairs(const Segment& q, const Segment& k, Visible&& visible) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < q.count; ++i)
    for (std::int64_t j = 0; j < k.count; ++j)
      n += visible(q.position(i), k.position(j));
  return n;
}

}  // namespace suite::ring

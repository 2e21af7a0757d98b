// How the balanced layout cuts documents over groups of ranks: the group sizes (divisors of
// n_c), where each group sits, and the group-cast's cut (one wait per document). Split from
// balanced_layout.cpp, which places the tokens within these groups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace suite::ring::balanced {

// Ranks a cut document goes over: one of n_c's divisors (ascending; its group every n_c / g-th
// rank, so that every rank of it works in the same rounds), the largest up to `want`, at least
// `need`.
std::int64_t group_size(const std::vector<std::int64_t>& divisors, std::int64_t want,
                        std::int64_t need);

// The group position (first rank, of n_c / g) of every document cut over g < n_c ranks, by level;
// -1 for the rest (balanced_groups.cpp says how and why).
std::vector<int> group_positions(const std::vector<std::size_t>& heaviest_first,
                                 const std::vector<std::int64_t>& groups,
                                 const std::vector<std::int64_t>& work,
                                 const std::vector<std::int64_t>& divisors, int n_c);

// The group-cast's groups: each document cut over the fewest ranks it must be (1: whole).
std::vector<std::int64_t> groups_for_one_wait(const std::vector<std::int64_t>& work,
                                              const std::vector<std::int64_t>& length,
                                              const std::vector<std::int64_t>& divisors, int n_c,
                                              std::int64_t c);

// The ring's groups: each document cut over as many ranks as chunks of min_chunk tokens allow
// (balanced_groups.cpp says when and why), sparse levels moved up.
std::vector<std::int64_t> groups_for_ring(const std::vector<std::int64_t>& work,
                                          const std::vector<std::int64_t>& length,
                                          const std::vector<std::int64_t>& divisors, int n_c,
                                          std::int64_t c, std::int64_t min_chunk);

}  // namespace suite::ring::balanced

// The traffic matrix of `moe --mode a2a`: the bytes every rank sends every rank in one
// all-to-all-v, from a generated pattern or a CSV file (nccl-tests PR #157's request).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace suite::moe {

enum class TrafficKind { uniform, zipf, incast, pair, file };

struct TrafficSpec {
  std::string text;  // as given, for case names and results
  TrafficKind kind = TrafficKind::uniform;
  double alpha = 1.2;  // zipf exponent
  std::string path;    // file
};

// "uniform", "zipf[:ALPHA]", "incast", "pair" or "file:PATH"; UsageError otherwise.
TrafficSpec parse_traffic(const std::string& text);

// Short name for case names: uniform, zipf1.2, incast, pair, file-<stem>.
std::string traffic_name(const TrafficSpec& t);

// [s * n + d]: bytes rank s sends rank d (self included), each a multiple of `elem`.
// Generated from `bytes`, what a rank sends in all (rounded down per pair to elements):
//   uniform: bytes / n to every rank;
//   zipf:    destination d gets a share of rank^-alpha over a permutation seeded by `seed`
//            (the same hot destinations for every sender);
//   incast:  every other rank sends all of it to rank 0; rank 0 sends uniformly;
//   pair:    node 0 and node 1 (ranks_per_node each) exchange it, each rank with the rank of
//            the other node with the same local index; nobody else sends (needs 2 nodes).
// file: n rows of n comma-separated non-negative numbers: bytes (integers, multiples of elem),
// or fractions of `bytes` when every entry is at most 1 (rounded down to elements).
// UsageError naming the file and entry for anything else.
std::vector<std::int64_t> traffic_matrix(const TrafficSpec& t, int n, int ranks_per_node,
                                         std::int64_t bytes, std::int64_t elem, std::uint64_t seed);

}  // namespace suite::moe

// model --section varlen: what packed variable-length documents do to context parallelism,
// predicted from the length distribution (or a file) alone: for every N_c and layout, the
// padding, the ranks' work max / mean, the ring's lockstep time in blocks and the efficiencies
// they predict, and the bytes per rank (which the mask does not change for the ring); and the
// group-cast's bytes per rank (the rows the queries see: bench/ring_attention/group_cast.hpp),
// its balance and, at F and W, both schedules' efficiency with their transfers and the W above
// which the group-cast's exchange hides. The same exact counts ring_attention and ulysses record
// while they run (bench/ring_attention/ring_work.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace suite::model_cli {

struct VarlenOptions {
  std::string docs;                  // --docs, as ring_attention takes it
  std::int64_t balanced_chunk = 0;   // --balanced-chunk, as ring_attention takes it
  std::vector<int> cp;               // N_c values
  std::int64_t tokens_per_rank = 0;  // c; 0: s / N_c
  double s = 0;                      // --seq, when tokens_per_rank is 0
  int u = 0;                         // Ulysses degree of a hybrid (0: none)
  std::vector<std::string> layouts;  // of the ring (part)
  bool causal = true;
  std::uint64_t seed = 1;
  double h = 0, g = 1, e = 2, b = 1;  // for the bytes
  double flops = 0, bw = 0;           // F and W for the efficiencies with the transfers
  std::string csv;                    // a file for the rows ("" none)
};

// Prints the table (and writes the CSV); throws suite::UsageError (one message) for a
// distribution, file, size or layout that cannot be laid out.
void print_varlen(const VarlenOptions& o);

}  // namespace suite::model_cli

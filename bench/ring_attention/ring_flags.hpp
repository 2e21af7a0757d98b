// ring_attention's flags as one section: what they hold, how they are added to the command line
// and the sweep they expand to. The attention shape (--heads, --kv-heads, --head-dim, --batch)
// is declared here once for ring_attention and ulysses.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/ring_attention/ring_cases.hpp"
#include "common/sim/sim.hpp"

namespace suite::ring {

// --heads, --kv-heads (0 = heads), --head-dim, --batch; `kv_heads` 0 until resolved.
void add_attention_shape_flags(CLI::App& app, AttentionShape& shape);
// The shape with --kv-heads 0 turned into the query heads.
AttentionShape resolved(AttentionShape shape);

struct RingFlags {
  std::string blocks = "128:512:x2";
  std::string layouts = "contiguous,zigzag";
  std::string variants = "ring";
  std::string causal = "1";
  AttentionShape shape{8, 0, 64, 1};
  int cp = 0;
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
  std::string cpu_progress = sim::kSmpiBuild ? "none" : "poll";
  std::string passes = "fwd";
  std::string grad_dtype = "auto";
  std::string docs;
  std::string varlen_calls = "pair";
  std::int64_t balanced_chunk = 0;
};

void add_ring_flags(CLI::App& app, RingFlags& f);
// Every case the flags name; UsageError naming the flag otherwise.
RingSweep ring_sweep(const RingFlags& f, DType dtype);

}  // namespace suite::ring

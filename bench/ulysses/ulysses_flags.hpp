// ulysses' flags as one section: what they hold, how they are added to the command line and the
// sweep they expand to (the attention shape is ring_attention's section's).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/ring_attention/ring_flags.hpp"
#include "bench/ulysses/ulysses_cases.hpp"

namespace suite::ulysses {

struct UlyssesFlags {
  std::string seq = "256,1K";
  std::string seq_per_rank;
  std::string cp = "0";
  std::string degrees = "all";
  std::string layouts = "zigzag";
  std::string ring_variants = "ring";
  std::string causal = "1";
  ring::AttentionShape shape{8, 0, 64, 1};
  bool kv_replicate = false;
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
  std::string passes = "fwd";
  std::string grad_dtype = "auto";
  std::string docs;
  std::int64_t balanced_chunk = 0;
};

void add_ulysses_flags(CLI::App& app, UlyssesFlags& f);
// Every case the flags name; UsageError naming the flag otherwise.
UlyssesSweep ulysses_sweep(const UlyssesFlags& f, DType dtype);

}  // namespace suite::ulysses

// Flag values the attention benchmarks share (ring_attention, ulysses), parsed one way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/ring_attention/ring_layout.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

// "contiguous,zigzag" -> layouts; UsageError naming `flag` and the allowed values otherwise.
std::vector<Layout> parse_layouts(const std::string& flag, const std::string& text);
// "0,1" -> {false, true}.
std::vector<bool> parse_causal_list(const std::string& flag, const std::string& text);
kernels::AttnKernelChoice parse_attn_kernel_flag(const std::string& text);
// --balanced-chunk (ring_attention, ulysses, model --section varlen): `note` ends its help.
void add_balanced_chunk_flag(CLI::App& app, std::int64_t& chunk, const std::string& note = "");

}  // namespace suite::ring

// Flag values the attention benchmarks share (ring_attention, ulysses), parsed one way.
#pragma once

#include <string>
#include <vector>

#include "bench/ring_attention/ring_layout.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

// "contiguous,zigzag" -> layouts; UsageError naming `flag` and the allowed values otherwise.
std::vector<Layout> parse_layouts(const std::string& flag, const std::string& text);
// "0,1" -> {false, true}.
std::vector<bool> parse_causal_list(const std::string& flag, const std::string& text);
kernels::AttnKernelChoice parse_attn_kernel_flag(const std::string& text);

}  // namespace suite::ring

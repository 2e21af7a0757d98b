// The attention methods' flags, declared here once and parsed one way: ring_attention, ulysses
// and the mesh's block add them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/layouts/ring_layout.hpp"
#include "kernels/attention/attention_engine.hpp"

namespace suite::ring {

// One --layout item: "zigzag" -> Layout::zigzag; UsageError naming the allowed values otherwise.
Layout parse_layout_name(const std::string& item);
// --layout (a list of layouts), --docs (packed documents), --kv-heads (0 = heads), --head-dim,
// --balanced-chunk: one help text each for ring_attention, ulysses, mesh and model (each with
// its own default).
void add_layout_flag(CLI::App& app, std::string& layouts);
void add_docs_flag(CLI::App& app, std::string& docs);
void add_kv_heads_flag(CLI::App& app, int& kv_heads);
void add_head_dim_flag(CLI::App& app, int& head_dim);
void add_balanced_chunk_flag(CLI::App& app, std::int64_t& chunk);

}  // namespace suite::ring

// Flags that several executables take with one meaning, declared once here: the model's sizes
// (--hidden, --heads, --batch, --ffn-hidden), the node size (--ranks-per-node), the DP sharding
// mode (--dp-shard), the attention path (--attention), message sizes (--sizes) and the seed. Each
// executable passes its own default in the variable it binds (each sizes its own run); the name,
// type and help are these.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace suite {

void add_hidden_flag(CLI::App& app, std::int64_t& hidden);
void add_heads_flag(CLI::App& app, std::int64_t& heads);
void add_heads_flag(CLI::App& app, int& heads);
void add_batch_flag(CLI::App& app, std::int64_t& batch);
// --ffn-hidden: d_ff, 0 = 4h (the executable resolves it).
void add_ffn_hidden_flag(CLI::App& app, std::int64_t& ffn_hidden);
// -L, --layers: L, the model's layers (model's totals, pipeline's stages).
void add_layers_flag(CLI::App& app, int& layers);
// --dp-shard: the DP sharding mode (common/formulas/dp_shard.hpp; model: one, pipeline: a list).
void add_dp_shard_flag(CLI::App& app, std::string& modes);
// --attention: fused (the scores never stored) or unfused (stored: the 5as/h term; sp_tp: a list,
// a case each; model: the plan's, one). parse_attention_path reads one item: true for fused.
void add_attention_path_flag(CLI::App& app, std::string& paths);
bool parse_attention_path(const std::string& item);
void add_ranks_per_node_flag(CLI::App& app, int& ranks_per_node);
// --sizes: message sizes in bytes, a list or range (parse_sweep).
void add_sizes_flag(CLI::App& app, std::string& sizes);
void add_seed_flag(CLI::App& app, std::uint64_t& seed);

}  // namespace suite

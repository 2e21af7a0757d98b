// The transformer layer's flags, declared once here: sp_tp's layer mode and the mesh's block add
// them (each with its own defaults, set before adding).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sp_tp/layer_config.hpp"

namespace CLI {
class App;
}

namespace suite::sp_tp {

struct LayerShapeFlags {
  std::int64_t seq = 1024, batch = 1, hidden = 1024, heads = 16, ffn_hidden = 0;
};

// --seq, then --batch, --hidden, --heads, --ffn-hidden (common/harness/shared_flags.hpp; --causal
// is attention's: common/device/attention_select.hpp).
void add_layer_shape_flags(CLI::App& app, LayerShapeFlags& f);

// --tp-overlap: none, ring, chunks:K (a list).
void add_tp_overlap_flag(CLI::App& app, std::string& modes);
// One --tp-overlap item: "none", "ring" or "chunks:K"; UsageError naming the flag otherwise.
TpOverlapMode parse_tp_overlap(const std::string& item);

}  // namespace suite::sp_tp

// The MoE layer's flags, declared once here: moe's flag section and the mesh's block (its MLP an
// MoE) add them, each with its own defaults (set before adding).
#pragma once

#include <string>
#include <vector>

#include "bench/moe/moe_config.hpp"

namespace CLI {
class App;
}

namespace suite::moe {

struct MoeLayerFlags {
  std::string experts = "8";  // a list
  int top_k = 2;
  std::string mlp = "swiglu";
  std::string dispatch = "flat";  // a list
  int ranks_per_node = 0;
};

// --experts, --top-k, --mlp, --dispatch, --ranks-per-node (common/harness/shared_flags.hpp).
void add_moe_layer_flags(CLI::App& app, MoeLayerFlags& f);

// "swiglu" or "gelu"; UsageError naming --mlp otherwise.
Mlp parse_mlp(const std::string& text);
// One --dispatch item: "flat" or "hierarchical"; UsageError naming the flag otherwise.
Dispatch parse_dispatch(const std::string& item);

}  // namespace suite::moe

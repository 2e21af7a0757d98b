#include "bench/moe/moe_layer_flags.hpp"

#include <CLI/CLI.hpp>

#include "common/harness/errors.hpp"
#include "common/harness/shared_flags.hpp"
#include "common/harness/size_list.hpp"

namespace suite::moe {

void add_moe_layer_flags(CLI::App& app, MoeLayerFlags& f) {
  app.add_option("--experts", f.experts,
                 "E: experts (list), a multiple of the expert-parallel group's size; in the mesh "
                 "the MoE that replaces the MLP (moe's layer, each expert of width --ffn-hidden, "
                 "dropless, no auxiliary loss), 0 = a dense MLP")
      ->capture_default_str();
  app.add_option("--top-k", f.top_k, "k: experts per token, 1 <= k <= E (at most 32)")
      ->capture_default_str();
  app.add_option("--mlp", f.mlp,
                 "expert MLP: swiglu (silu(x W_gate) * x W_up, then W_down: 6 h d_ff FLOPs per "
                 "copy) or gelu (two matrices: 4 h d_ff)")
      ->capture_default_str();
  app.add_option("--dispatch", f.dispatch,
                 "dispatch and combine algorithms (list): flat (one all-to-all-v over the "
                 "group, a row per kept copy) or hierarchical (a row per (token, destination "
                 "node) across nodes to the rank with the same local index there, which fans "
                 "it out inside its node; the combine sums a token's copies inside the node "
                 "and sends one partial sum home). Cases named _hier<P>; bytes recorded per "
                 "level (METHODS.md 4.4)")
      ->capture_default_str();
  add_ranks_per_node_flag(app, f.ranks_per_node);
}

Mlp parse_mlp(const std::string& text) {
  if (text == "swiglu") return Mlp::swiglu;
  if (text == "gelu") return Mlp::gelu;
  throw UsageError("--mlp: unknown MLP '" + text + "' (swiglu, gelu)");
}

Dispatch parse_dispatch(const std::string& item) {
  return named<Dispatch>(
      "--dispatch", "dispatch",
      {{"flat", Dispatch::flat}, {"hierarchical", Dispatch::hierarchical}})(item);
}

}  // namespace suite::moe

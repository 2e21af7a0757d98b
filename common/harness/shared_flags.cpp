#include "common/harness/shared_flags.hpp"

#include <CLI/CLI.hpp>

#include "common/harness/size_list.hpp"

namespace suite {
namespace {

template <class Int>
void add_heads(CLI::App& app, Int& heads) {
  app.add_option("--heads", heads, "a: query heads (with --hidden: h/a must be 64 or 128)")
      ->capture_default_str();
}

}  // namespace

void add_hidden_flag(CLI::App& app, std::int64_t& hidden) {
  app.add_option("--hidden", hidden, "h: hidden size")->capture_default_str();
}

void add_heads_flag(CLI::App& app, std::int64_t& heads) {
  add_heads(app, heads);
}
void add_heads_flag(CLI::App& app, int& heads) {
  add_heads(app, heads);
}

void add_batch_flag(CLI::App& app, std::int64_t& batch) {
  app.add_option("--batch", batch,
                 "b: micro-batch, in sequences (a CP group splits each; the mesh's global batch "
                 "is D b)")
      ->capture_default_str();
}

void add_layers_flag(CLI::App& app, int& layers) {
  app.add_option("--layers,-L", layers,
                 "L: layers of the model (model: every section also prints totals over L layers; "
                 "pipeline, and mesh with --pp above 1: split over its p v stages, the first L mod "
                 "p v holding one more, 0 = 2 p v)")
      ->capture_default_str();
}

void add_dp_shard_flag(CLI::App& app, std::string& modes) {
  // The modes of common/formulas/dp_shard.hpp, as each executable uses them.
  static const std::string help =
      "what DP shards: none (gradients all-reduced), optimizer (ZeRO-1: gradients "
      "reduce-scattered, the step on the shard, parameters all-gathered after it), grads "
      "(parameters also kept sharded between steps, gathered once a step: FSDP without "
      "resharding) or full (ZeRO-3: gathered before each forward and backward); model: the "
      "plan's, over DP x CP; pipeline: a list, a case each, the replicas' gradients summed after "
      "each stage's last W, then a plain SGD step (w -= 0.1 g)";
  app.add_option("--dp-shard", modes, help)->capture_default_str();
}

void add_attention_path_flag(CLI::App& app, std::string& paths) {
  app.add_option("--attention", paths,
                 "attention path: fused (flash kernel, scores not stored) or unfused (stores the "
                 "softmax, its dropout mask and output: the 5as/h term; the planner charges the "
                 "scores through HBM at the calibration's hbm_bw); sp_tp: a list, a case each; "
                 "model: the plan's, one")
      ->capture_default_str();
}

bool parse_attention_path(const std::string& item) {
  return named<bool>("--attention", "path", {{"fused", true}, {"unfused", false}})(item);
}

void add_ffn_hidden_flag(CLI::App& app, std::int64_t& ffn_hidden) {
  app.add_option("--ffn-hidden", ffn_hidden,
                 "d_ff: the MLP's width (each expert's in an MoE layer); 0 = 4h")
      ->capture_default_str();
}

void add_ranks_per_node_flag(CLI::App& app, int& ranks_per_node) {
  app.add_option("--ranks-per-node", ranks_per_node,
                 "P: consecutive ranks that share a node. moe: inside the EP group, must divide "
                 "N_e (0 = the placement's: ranks on this host, cut to divide N_e; set it to "
                 "pretend several nodes on one machine); mesh: recorded, and --dispatch "
                 "hierarchical groups each expert group's ranks by it (0 = not given); model: "
                 "the mesh's and plan's links inside a node (--bw, --lat)")
      ->capture_default_str();
}

void add_sizes_flag(CLI::App& app, std::string& sizes) {
  app.add_option("--sizes", sizes, "Message sizes in bytes (list or range), e.g. 1K:64M:x2")
      ->capture_default_str();
}

void add_seed_flag(CLI::App& app, std::uint64_t& seed) {
  app.add_option("--seed", seed,
                 "Seed for generated inputs, dropout masks and drawn document lengths (--docs)")
      ->capture_default_str();
}

}  // namespace suite

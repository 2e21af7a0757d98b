// moe's flags as one section: what they hold, how they are added to the command line and the
// cases they name in each mode (the MoE layer's own flags are moe_layer_flags.hpp's, shared
// with the mesh).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/moe/moe_layer_flags.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace CLI {
class App;
}

namespace suite::moe {

struct MoeFlags {
  MoeLayerFlags layer;
  std::string tokens = "1024", skew = "none", alpha = "1.0", hot = "", capacity = "0", pass = "fwd",
              max_nodes = "0", mode = "layer", traffic = "uniform", bytes = "1M", redundant = "0",
              a2a_algo = "flat,pairwise,hierarchical", overlap = "none";
  std::int64_t hidden = 512, ffn_hidden = 1024;
  int balance_steps = 0, ep = 0;
  double balance_rate = 0.05;
};

void add_moe_flags(CLI::App& app, MoeFlags& f);
// Every case the flags name in their --mode (layer or a2a); the layer's flags are checked in
// both, so a typo never passes silently. UsageError naming the flag otherwise.
std::vector<CaseSpec> moe_flag_cases(BenchContext& ctx, const MoeFlags& f);

}  // namespace suite::moe

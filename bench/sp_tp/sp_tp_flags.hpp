// sp_tp's flags as one section: what they hold, how they are added to the command line and the
// cases they name in each mode (the layer's shape and --tp-overlap are layer_flags.hpp's, shared
// with the mesh).
#pragma once

#include <string>
#include <vector>

#include "bench/sp_tp/layer_flags.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace CLI {
class App;
}

namespace suite::sp_tp {

struct SpTpFlags {
  std::string mode = "collectives";
  std::string sizes = "1K:16M:x4";
  std::string ops = "allreduce,rs_ag";
  LayerShapeFlags shape;
  std::string causal = "1";
  bool activation_case = true;
  float dropout = 0.1f;
  std::string variants = "tp,tp_sp";
  std::string attention = "fused";
  kernels::AttnKernelChoice attn_kernel = kernels::AttnKernelChoice::automatic;
  std::string pass = "fwd";
  std::string bwd_overlap = "1";
  std::string tp_overlap = "none";
  int tp = 0;  // TP group size; 0 = all ranks
};

void add_sp_tp_flags(CLI::App& app, SpTpFlags& f);
// Every case the flags name in their --mode (collectives, layer or all); the layer's flags are
// checked in every mode, so a typo never passes silently. UsageError naming the flag otherwise.
std::vector<CaseSpec> sp_tp_flag_cases(BenchContext& ctx, const SpTpFlags& f);

}  // namespace suite::sp_tp

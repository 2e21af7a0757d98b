// model --section plan: the planner's ranked list of meshes (common/formulas/mesh_plan.hpp) for a
// model, a sequence length, a global batch and a cluster, at the rates of a calibration file
// (scripts/planner/calibrate.py) or of the command line.
#pragma once

#include <string>

#include "bench/model/params.hpp"

namespace suite::model_cli {

struct PlanOptions {
  std::string calibration;  // a calibrate.py file; empty: the rates of the flags
  int gpus = 64, ranks_per_node = 8, top = 10, max_pp = 64;
  double memory_gb = 80, global_tokens = 0;  // 0: one sequence per GPU
  double bw_inter = 50e9, lat = 1e-6, lat_inter = 3e-6;
  bool zero1 = true;                   // --no-zero1: --dp-shard none
  std::string dp_shard = "optimizer";  // none, optimizer, grads, full
  std::string recompute = "none";      // none, selective, full
  double vocab = 0;                    // 0: no embedding or output layer
  std::string attention = "fused";     // fused (FlashAttention) or unfused (scores in HBM)
  bool ep_overlap = false;             // EP's all-to-alls behind another micro-batch (DualPipe)
  std::string orders = "tp,cp,ep,dp/tp,dp,ep,cp/cp,ep,dp,tp";
  std::string csv;        // every mesh, one row each
  std::string compare;    // a mesh to place in the ranking, e.g. tp8-cp16-pp16-dp8
  std::string schedules;  // PP's schedules to try (a list); empty: 1f1b, interleaved, zb-h1, zb-v
  int chunks = 0;         // interleaved's v; 0: every v from 2 that gives each chunk a layer
};

// Prints the top meshes and, with --compare, where that one ranks; throws UsageError (naming
// the flag or the file) for a calibration that cannot be used or a job no mesh fits.
void print_plan(const Params& p, const PlanOptions& o, const std::string& dtype, double e,
                double e_grad);

}  // namespace suite::model_cli

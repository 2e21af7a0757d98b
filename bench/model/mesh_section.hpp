// model --section mesh: the composed block's figures (METHODS.md section 6) for a mesh of
// --tp x --cp x --dp ranks in each --order: bytes per rank on each axis, the activation ledger
// and weights per rank, and the step's time per axis on a two-tier cluster (--bw and --lat
// inside a node of --ranks-per-node, --bw-inter and --lat-inter across nodes).
#pragma once

#include <string>

#include "bench/model/params.hpp"

namespace suite::model_cli {

struct MeshOptions {
  int dp = 1, ep = 0, ranks_per_node = 8;
  std::string order = "tp,cp,ep,dp";  // orders separated by '/'
  std::string cp_method = "ring";     // ring, allgather, ulysses, hybrid:U
  double bw_inter = 50e9, lat = 1e-6, lat_inter = 3e-6;
  bool backward = true;
};

// Throws UsageError (naming the flag) for a mesh that cannot be.
void print_mesh(const Params& p, const MeshOptions& o, double e, double e_grad);

}  // namespace suite::model_cli

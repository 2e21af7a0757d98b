// The mesh benchmark's cases: one composed block per mesh shape, order, CP method and pass
// (sweeps over --tp, --cp, --dp lists), timed as a step (forward, backward, gradient sums), its
// bytes per axis beside METHODS.md section 6, and checked against the single-rank block.
#pragma once

#include <vector>

#include "bench/mesh/mesh_config.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::mesh {

CaseSpec make_case(BenchContext& ctx, const MeshConfig& cfg);

}  // namespace suite::mesh

// The table the mesh benchmark prints at the end: per case, the step, each axis's exposed time,
// bytes per axis measured beside predicted, the ledger and the check.
#pragma once

#include <vector>

#include "common/results/results.hpp"

namespace suite::mesh {

// Rank 0, after the run.
void print_mesh_table(const std::vector<CaseRecord>& records);

}  // namespace suite::mesh

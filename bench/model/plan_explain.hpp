// model --section plan --compare: why a mesh ranks where it does. Its step split into compute,
// each axis's exposed time, the bubble and the hops, and recomputation, with its memory, beside
// the planner's best mesh, and the part that decides between them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/formulas/mesh_plan.hpp"

namespace suite::model_cli {

// The part of the step where `mesh` loses most time to `best` ("none" where it loses nothing;
// whether it fits is PlanEntry::fits).
std::string deciding_part(const model::PlanEntry& mesh, const model::PlanEntry& best);

// Prints plan[compared] beside plan[0] part by part, the deciding part, and one
// "explanation:" line of each (every part in seconds, memory in bytes) for scripts.
void print_explanation(const std::vector<model::PlanEntry>& plan, std::size_t compared);

}  // namespace suite::model_cli

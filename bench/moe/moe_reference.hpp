// The single-process reference of one MoE layer, in double on the host: the routing of this
// rank's tokens recomputed from the same (rounded) tokens and router weights, the drop rule
// re-applied to the group's gathered routing, and the layer output of this rank's tokens
// computed expert by expert from the same weights with that routing (drops included).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/moe/moe_config.hpp"

namespace suite::moe {

struct GroupRouting {  // every rank of the group, in rank order, [ranks * T * k]
  std::vector<std::int32_t> chosen;
  std::vector<float> gates;
  std::vector<std::uint8_t> keep;
};

struct ReferenceOutcome {
  bool passed = true;
  bool skipped = false;
  double max_abs_err = 0;
  std::string detail;
  std::int64_t routing_errors = 0;  // tokens whose top-k or gates disagree with the reference
  std::int64_t keep_errors = 0;     // copies whose drop decision disagrees with the rule
};

// Tolerance on outputs (relative to max(1, max |reference|)) and on router probabilities.
double output_tolerance(DType t);
double routing_tolerance(DType t);

// init_block's values as the device holds them: generated in double, rounded to c.dtype.
std::vector<double> device_values(const MoeConfig& c, Tensor t, std::int64_t index, std::int64_t r0,
                                  std::int64_t rows, std::int64_t cols);

// One row through an expert's MLP in double: hidden [w1_cols] = x W1 (w1 [h, w1_cols]), act
// [d_ff] (GeLU, or SwiGLU's silu(gate) * up), y [h] = act W2 (w2 [d_ff, h]). Shared by the
// output and the gradient references.
void reference_mlp_row(const MoeConfig& c, const double* w1, const double* w2, const double* x,
                       double* hidden, double* act, double* y);

// True when the reference of this case is too large to compute on the host in a check (then
// the check is skipped, with the reason in `why`).
bool reference_too_large(const MoeConfig& c, std::string& why);

ReferenceOutcome check_against_reference(const MoeConfig& c, int group_rank,
                                         std::int64_t first_token,
                                         const std::vector<float>& select_bias,
                                         const GroupRouting& routing,
                                         const std::vector<double>& output);

}  // namespace suite::moe

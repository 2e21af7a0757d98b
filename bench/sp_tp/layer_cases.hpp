// sp_tp layer mode: one transformer layer forward as TP and as TP+SP over the same group,
// with the SP == TP output check, the activation-memory ledger against METHODS.md, and
// collective bytes per layer measured against 4 (t-1)/t * sbh * e.
#pragma once

#include <vector>

#include "bench/sp_tp/layer_config.hpp"
#include "common/bench_case.hpp"
#include "common/context.hpp"

namespace suite::sp_tp {

struct LayerSweep {
  LayerConfig base;               // s, b, h, heads, d_ff, dropout, causal
  std::vector<Variant> variants;  // tp, tp_sp
  std::vector<bool> fused;        // attention paths: true = fused (flash), false = unfused
};

// Validates the shape for this group (UsageError) and builds one case per (attention, variant).
std::vector<CaseSpec> layer_cases(BenchContext& ctx, const LayerSweep& sweep);

// Predicted activation bytes per layer (METHODS.md, with this dtype's element size).
double predicted_activation_bytes(const LayerConfig& cfg, Variant v);

void print_layer_table(const std::vector<CaseRecord>& records);

}  // namespace suite::sp_tp

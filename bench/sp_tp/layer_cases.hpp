// sp_tp layer mode: one transformer layer as TP and as TP+SP over the same group, forward
// (--pass fwd) or a training step (--pass fwd_bwd: forward then backward), with the SP == TP
// checks (output; gradients), the activation-memory ledger against METHODS.md, and per pass the
// collectives (calls and bytes per rank) against the formulas.
#pragma once

#include <vector>

#include "bench/sp_tp/layer_config.hpp"
#include "bench/sp_tp/layer_report.hpp"
#include "common/harness/bench_case.hpp"
#include "common/harness/context.hpp"

namespace suite::sp_tp {

struct LayerSweep {
  LayerConfig base;                // s, b, h, heads, d_ff, dropout
  std::vector<bool> causal{true};  // attention masks: causal and/or full
  std::vector<Variant> variants;   // tp, tp_sp
  std::vector<bool> fused;         // attention paths: true = fused (flash), false = unfused
  std::vector<Pass> passes{Pass::fwd};
  std::vector<bool> bwd_overlap{true};  // TP+SP training steps: overlapped and/or not
  std::vector<TpOverlapMode> tp_overlap{TpOverlapMode{}};  // TP+SP's collectives
};

// Validates the shape for this group (UsageError) and builds one case per (attention, variant,
// pass[, overlap]). Forward cases keep the names and parameters they always had; training-step
// cases add "_fwd_bwd" (TP+SP without the overlap: "_fwd_bwd_nooverlap") and the `pass` and
// `bwd_overlap` parameters.
std::vector<CaseSpec> layer_cases(BenchContext& ctx, const LayerSweep& sweep);

// Why this build / backend cannot run the backward of `cfg`'s attention path (nullopt: it can).
std::optional<std::string> backward_unavailable(BenchContext& ctx, const LayerConfig& cfg);

}  // namespace suite::sp_tp

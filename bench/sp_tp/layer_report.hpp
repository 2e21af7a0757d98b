// What a layer case writes beside its times: the ledger against METHODS.md, per pass the
// collectives (calls of each kind and bytes per rank, measured by the transport's counters)
// against common/model's formulas, the backward's peak memory, the overlap's transfer times,
// the checks' figures; and the summary tables printed at the end of a run.
#pragma once

#include <vector>

#include "bench/sp_tp/layer_check.hpp"
#include "bench/sp_tp/layer_config.hpp"
#include "bench/sp_tp/transformer_layer.hpp"
#include "common/harness/bench_case.hpp"

namespace suite::sp_tp {

// Predicted activation bytes per layer (METHODS.md, with this dtype's element size).
double predicted_activation_bytes(const LayerConfig& cfg, Variant v);

struct StepExchanges {
  double seconds = 0;  // summed start-to-completion time of the step's exchanges
  int total = 0;       // exchanges
  int done_early = 0;  // seen complete while the GEMM still ran (polled: CPU backend)
};

struct LayerRun {
  const LayerConfig& cfg;
  Variant variant;
  TransformerLayer& layer;
  LayerOps& ops;
  const LayerCheckResult& check;
  // Per timed step, the overlapped all-gathers' exchanges (empty: none ran).
  const std::vector<StepExchanges>& exchanges;
  std::int64_t bwd_peak_bytes;  // the layer allocator's peak during the last backward
  bool host_polled;             // the transfers are polled by the host (CPU backend)
};

void report_layer(const LayerRun& run, const Measurement& m, CaseRecord& rec);

void print_layer_table(const std::vector<CaseRecord>& records);

}  // namespace suite::sp_tp

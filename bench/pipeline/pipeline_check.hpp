// A pipeline case's check: what this rank's chunks hold after the step (the loss on the last
// stage, the input gradients on the first, each layer's weight gradients) against one rank
// running all L layers on the same micro-batches, as named relative errors.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/pipeline/dp_sums.hpp"
#include "bench/pipeline/pipeline_executor.hpp"
#include "bench/pipeline/pipeline_flags.hpp"
#include "common/harness/context.hpp"

namespace suite::pipeline {

using NamedErrors = std::vector<std::pair<std::string, double>>;

// The residual MLP stages against StageLayers holding every layer. With DP sums (dp non-null)
// the reference runs every replica's micro-batches: the loss and input gradients of this
// replica's, and in place of each layer's own gradients the summed gradients and the updated
// parameters of this rank's shard.
NamedErrors mlp_errors(const PipelineConfig& cfg, const Schedule& schedule,
                       PipelineExecutor& executor, int pp_rank, const DataParallelSums* dp,
                       int replica);
// The block stages against mesh's block of every layer at T = C = 1 on this rank: the loss and
// input gradients on this rank's rows, the weight gradients gathered over the stage's TP group
// (collective over it); with DP sums, as mlp_errors, the reference's tensors cut to this rank's
// TP slices.
NamedErrors block_errors(const PipelineConfig& cfg, BenchContext& ctx, const Schedule& schedule,
                         PipelineExecutor& executor, int pp_rank, const DataParallelSums* dp,
                         int replica);

}  // namespace suite::pipeline

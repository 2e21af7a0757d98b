// The DP axis as large jobs shard it (METHODS.md sections 6 and 7): the bytes each rank sends
// and the memory it holds for one stage's weights, replicated over `replicas` ranks (the C D
// ranks of DP x CP that hold a dense weight), under each --dp-shard mode. Rings, as NCCL runs
// them: a reduce-scatter or all-gather of N bytes over n ranks sends (n-1)/n N per rank, an
// all-reduce twice that. The gradient sums start once the stage's last W is done, so the
// gradients of all m micro-batches are accumulated whole before they are summed.
#pragma once

#include <string>
#include <vector>

namespace suite::model {

// none: gradients all-reduced; optimizer (ZeRO-1): gradients reduce-scattered, the optimizer
// step on the rank's shard, the parameters all-gathered after it; grads: the same sums, the
// parameters kept sharded between steps and all-gathered once before the step's first forward
// (FSDP without resharding after the forward, as Llama 3 ran it); full: the parameters
// resharded after each micro-batch's forward and gathered again for its backward (ZeRO-3).
enum class DpShard { none, optimizer, grads, full };

const char* dp_shard_name(DpShard mode);
// Throws UsageError naming --dp-shard and the known modes.
DpShard parse_dp_shard(const std::string& name);
std::vector<std::string> dp_shard_names();

struct DpShardSizes {
  double params = 0;            // the stage's parameters (elements) on this rank
  double layer_params = 0;      // the largest layer's: full's working set, gathered one at a time
  int replicas = 1;             // n: the ranks holding the same parameters
  int microbatches = 1;         // m
  double param_bytes = 2;       // e: bf16 weights
  double grad_bytes = 4;        // e_g: fp32 gradients
  double optimizer_bytes = 12;  // fp32 master weights and Adam's two moments
};

struct DpShardCost {
  // Bytes this rank sends per step, by collective.
  double all_reduce = 0, reduce_scatter = 0, all_gather = 0;
  // Peak bytes held during the step: parameters (whole, or the shard and one gathered layer),
  // the gradient accumulator (whole: the sums start after the last W), optimizer state.
  double param_memory = 0, grad_memory = 0, optimizer_memory = 0;
  // The parameters held between steps (sharded by grads and full).
  double resting_param_memory = 0;
  double sent() const { return all_reduce + reduce_scatter + all_gather; }
  double memory() const { return param_memory + grad_memory + optimizer_memory; }
};

DpShardCost dp_shard_cost(DpShard mode, const DpShardSizes& s);

}  // namespace suite::model

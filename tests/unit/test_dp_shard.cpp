// The --dp-shard modes' bytes and memory per rank against figures counted by hand: a stage of
// 1000 parameters (largest layer 100) over 4 replicas, 3 micro-batches, bf16 weights, fp32
// gradients, 12 bytes of optimizer state a parameter.
#include <gtest/gtest.h>

#include "common/formulas/dp_shard.hpp"
#include "common/harness/errors.hpp"

namespace suite::model {
namespace {

DpShardSizes sizes() {
  DpShardSizes s;
  s.params = 1000;
  s.layer_params = 100;
  s.replicas = 4;
  s.microbatches = 3;
  return s;
}

TEST(DpShard, NoneAllReducesTheGradients) {
  const DpShardCost c = dp_shard_cost(DpShard::none, sizes());
  EXPECT_DOUBLE_EQ(c.all_reduce, 6000);  // 2 x 3/4 x 1000 x 4
  EXPECT_DOUBLE_EQ(c.sent(), 6000);
  EXPECT_DOUBLE_EQ(c.memory(), 2000 + 4000 + 12000);
  EXPECT_DOUBLE_EQ(c.resting_param_memory, 2000);
}

TEST(DpShard, OptimizerShardsTheOptimizerState) {
  const DpShardCost c = dp_shard_cost(DpShard::optimizer, sizes());
  EXPECT_DOUBLE_EQ(c.reduce_scatter, 3000);  // 3/4 x 1000 x 4
  EXPECT_DOUBLE_EQ(c.all_gather, 1500);      // 3/4 x 1000 x 2
  EXPECT_DOUBLE_EQ(c.all_reduce, 0);
  EXPECT_DOUBLE_EQ(c.memory(), 2000 + 4000 + 3000);
  EXPECT_DOUBLE_EQ(c.resting_param_memory, 2000);
}

TEST(DpShard, GradsKeepsTheParametersShardedBetweenSteps) {
  const DpShardCost c = dp_shard_cost(DpShard::grads, sizes());
  EXPECT_DOUBLE_EQ(c.sent(), 4500);
  EXPECT_DOUBLE_EQ(c.memory(), 9000);
  EXPECT_DOUBLE_EQ(c.resting_param_memory, 500);
}

TEST(DpShard, FullGathersForEachForwardAndBackward) {
  const DpShardCost c = dp_shard_cost(DpShard::full, sizes());
  EXPECT_DOUBLE_EQ(c.all_gather, 9000);  // 2 x 3 micro-batches x 1500
  EXPECT_DOUBLE_EQ(c.reduce_scatter, 3000);
  EXPECT_DOUBLE_EQ(c.param_memory, 500 + 200);  // the shard and one gathered layer
  EXPECT_DOUBLE_EQ(c.memory(), 700 + 4000 + 3000);
}

// A reduce-scatter and an all-gather of the same bytes are an all-reduce.
TEST(DpShard, ZeroOneMovesAnAllReducesBytes) {
  DpShardSizes s = sizes();
  s.param_bytes = s.grad_bytes;
  EXPECT_DOUBLE_EQ(dp_shard_cost(DpShard::optimizer, s).sent(),
                   dp_shard_cost(DpShard::none, s).sent());
}

TEST(DpShard, Names) {
  for (const std::string& n : dp_shard_names())
    EXPECT_EQ(dp_shard_name(parse_dp_shard(n)), n);
  EXPECT_THROW(parse_dp_shard("zero3"), UsageError);
}

}  // namespace
}  // namespace suite::model

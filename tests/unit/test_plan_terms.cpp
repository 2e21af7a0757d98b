// The planner's terms of a real run (common/formulas/plan_terms.hpp) and their use in
// plan_meshes: recomputation, DP sharding, the embedding and output layer, against counts worked
// out by hand here.
#include <gtest/gtest.h>

#include <cmath>

#include "common/formulas/mesh_plan.hpp"
#include "common/formulas/plan_terms.hpp"
#include "tests/unit/tiny_block.hpp"

namespace sm = suite::model;

namespace {

// s 128, h 64, a 4, n_kv 4, d_ff 256, 2 layers; one sequence a GPU.
sm::ModelSpec small_model() {
  sm::ModelSpec md;
  md.h = 64, md.a = 4, md.n_kv = 4, md.d_ff = 256, md.layers = 2;
  return md;
}

sm::JobSpec small_job(int gpus) {
  sm::JobSpec job;
  job.s = 128, job.global_tokens = 128.0 * gpus, job.gpus = gpus, job.memory_bytes = 1e12;
  job.max_pp = 1;
  return job;
}

// One GPU a node: TP stays 1, every other axis spans the network.
const sm::Cluster kCluster{
    1, sm::same_rates({1e11, 1e-6}), sm::same_rates({1e10, 5e-6}), 1e13, 1e13, 1e13};

std::vector<sm::PlanEntry> plan(const sm::ModelSpec& md, const sm::JobSpec& job) {
  return sm::plan_meshes(md, job, kCluster, {suite::parse_mesh_order("tp,cp,ep,dp")});
}

const sm::PlanEntry& mesh_named(const std::vector<sm::PlanEntry>& p, const std::string& name) {
  for (const auto& e : p)
    if (e.name() == name) return e;
  throw std::runtime_error("no mesh " + name);
}

}  // namespace

// bf16 weight 2, fp32 gradient 4, Adam 12 bytes; over 8 ranks: ZeRO-1 2 + 4 + 1.5; grads the
// same at the step's peak (the weights gathered whole, the gradients accumulated whole before
// their reduce-scatter); full 0.25 + 4 + 1.5.
TEST(PlanTerms, StateBytesPerParam) {
  EXPECT_DOUBLE_EQ(sm::state_bytes_per_param(2, sm::DpShard::none, 8), 18);
  EXPECT_DOUBLE_EQ(sm::state_bytes_per_param(2, sm::DpShard::optimizer, 8), 7.5);
  EXPECT_DOUBLE_EQ(sm::state_bytes_per_param(2, sm::DpShard::grads, 8), 7.5);
  EXPECT_DOUBLE_EQ(sm::state_bytes_per_param(2, sm::DpShard::full, 8), 5.75);
}

// The tiny block's 8 rows (n h e = 64 bytes a row-set of h): LayerNorm inputs (2 x 64), the
// first's output (64), dropout masks (2 x 8 x 4 = 64), the projection's input (64), Q K V
// (8 x 6 x 2 x 2 = 192), the lse (2 heads x 8 x 4 = 64), the second LayerNorm's output (64),
// fc1's and GeLU's outputs (2 x 8 x 16 x 2 = 512): 1152. Selective drops both LayerNorm outputs
// and GeLU's (64 + 64 + 256): 768. Full keeps the input: 64.
TEST(PlanTerms, HeldLayerBytesByHand) {
  const sm::MeshBlock m = tiny_block();
  EXPECT_DOUBLE_EQ(sm::held_layer_bytes(m, sm::Recompute::none), 1152);
  EXPECT_DOUBLE_EQ(sm::held_layer_bytes(m, sm::Recompute::selective), 768);
  EXPECT_DOUBLE_EQ(sm::held_layer_bytes(m, sm::Recompute::full), 64);
}

// Dense weights of the tiny layer: LayerNorms 4 h = 16, QKV 4 x 6 x 2 = 48, projection 16, MLP
// 2 x 4 x 16 = 128: 208 params, 416 bytes; gathered over C D = 8 ranks twice (forward and
// backward): 2 x 7 x (1 us + 416 / (8 x 1e9)).
TEST(PlanTerms, FullShardGatherByHand) {
  sm::MeshBlock m = tiny_block();
  m.C = 2, m.D = 4;
  EXPECT_NEAR(sm::full_shard_gather_s(m, {1e9, 1e-6}), 14 * (1e-6 + 416.0 / 8e9), 1e-18);
  m.C = 1, m.D = 1;
  EXPECT_DOUBLE_EQ(sm::full_shard_gather_s(m, {1e9, 1e-6}), 0);
}

// The output layer at b 2 (16 rows), V 100, T 2: 2 x 16 x 4 x 100 / 2 = 6400 FLOPs each of the
// forward, the input gradient and the weight gradient; its weights h V / T = 200 a rank; its
// fp32 logits 16 x 50 x 4 = 3200 bytes.
TEST(PlanTerms, VocabByHand) {
  sm::MeshBlock m = tiny_block();
  m.b = 2, m.T = 2;
  const auto c = sm::output_layer_costs(m, 100, 1e3);
  EXPECT_DOUBLE_EQ(c.forward, 6.4);
  EXPECT_DOUBLE_EQ(c.input_grad, 6.4);
  EXPECT_DOUBLE_EQ(c.weight_grad, 6.4);
  EXPECT_DOUBLE_EQ(sm::vocab_params(m, 100), 200);
  EXPECT_DOUBLE_EQ(sm::logits_bytes(m, 100), 3200);
}

TEST(PlanTerms, NamesRoundTripAndBadNamesAreRefused) {
  for (auto r : {sm::Recompute::none, sm::Recompute::selective, sm::Recompute::full})
    EXPECT_EQ(sm::parse_recompute(sm::recompute_name(r)), r);
  for (auto d : {sm::DpShard::none, sm::DpShard::optimizer, sm::DpShard::grads, sm::DpShard::full})
    EXPECT_EQ(sm::parse_dp_shard(sm::dp_shard_name(d)), d);
  EXPECT_ANY_THROW(sm::parse_recompute("some"));
  EXPECT_ANY_THROW(sm::parse_dp_shard("zero1"));
}

// One GPU, 2 layers, 2 micro-batches: full recomputation runs each layer's forward again, 2 x 2
// times: GEMMs 2 x 128 x 64 x (192 + 64 + 512) = 12,582,912 FLOPs and causal attention
// 4 x 128 x 128 / 2 x 64 = 2,097,152, at 1e13.
TEST(PlanMeshesTerms, FullRecomputationAddsOneForwardALayer) {
  const sm::ModelSpec md = small_model();
  sm::JobSpec job = small_job(1);
  job.global_tokens = 256;
  const double base = plan(md, job).front().step_s;
  job.recompute = sm::Recompute::full;
  const sm::PlanEntry& e = plan(md, job).front();
  const double forward = (12582912.0 + 2097152.0) / 1e13;
  EXPECT_NEAR(e.recompute_s, 4 * forward, 1e-15);
  EXPECT_NEAR(e.step_s - base, 4 * forward, 1e-15);
}

// Four GPUs as DP 4, 2 layers of 49,408 dense params (LayerNorms 256, QKV 12,288, projection
// 4096, MLP 32,768): Adam's 12 bytes whole cost 2 x 49,408 x 9 bytes more than over 4 ranks.
// A vocabulary of 1000 adds its 64,000 weights at 2 + 4 + 3 bytes and 128 rows of fp32 logits.
TEST(PlanMeshesTerms, MemoryOfShardingAndVocabByHand) {
  const std::string dp4 = "tp1-cp1-pp1-dp4 tp,cp,ep,dp";
  sm::ModelSpec md = small_model();
  sm::JobSpec job = small_job(4);
  const double zero1 = mesh_named(plan(md, job), dp4).memory_bytes;
  job.dp_shard = sm::DpShard::none;
  EXPECT_DOUBLE_EQ(mesh_named(plan(md, job), dp4).memory_bytes - zero1, 2 * 49408.0 * 9);
  job.dp_shard = sm::DpShard::optimizer;
  md.vocab = 1000;
  EXPECT_DOUBLE_EQ(mesh_named(plan(md, job), dp4).memory_bytes - zero1,
                   64000.0 * 9 + 128 * 1000 * 4);
}

// Every mesh's parts sum to its step, whatever the terms: a pipeline (bubble and hops), the
// output layer, each recomputation and each sharding.
TEST(PlanMeshesTerms, PartsSumToTheStep) {
  sm::ModelSpec md = small_model();
  md.layers = 4, md.vocab = 1000;
  sm::JobSpec job = small_job(8);
  job.global_tokens = 128.0 * 32, job.max_pp = 4;
  for (auto r : {sm::Recompute::none, sm::Recompute::selective, sm::Recompute::full})
    for (auto d : {sm::DpShard::none, sm::DpShard::optimizer, sm::DpShard::full}) {
      job.recompute = r, job.dp_shard = d;
      const auto p = plan(md, job);
      ASSERT_FALSE(p.empty());
      for (const auto& e : p) {
        const double parts =
            e.compute_s + e.tp_s + e.cp_s + e.ep_s + e.dp_s + e.pp_s + e.recompute_s;
        EXPECT_NEAR(parts, e.step_s, 1e-12 * e.step_s)
            << e.name() << " " << sm::recompute_name(r) << " " << sm::dp_shard_name(d);
      }
    }
}

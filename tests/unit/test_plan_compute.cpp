// The planner's compute terms (common/formulas/plan_compute.hpp): GEMM rates by size, the
// non-matrix work's bytes, Adam's step, unfused attention and the EP overlap in plan_meshes,
// against counts worked out by hand here.
#include <gtest/gtest.h>

#include <cmath>

#include "common/formulas/mesh_plan.hpp"
#include "common/formulas/plan_compute.hpp"
#include "tests/unit/tiny_block.hpp"

namespace sm = suite::model;

namespace {}  // namespace

// Points at 1e9 FLOPs (100 TFLOP/s) and 1e11 (200): 1e10 lies halfway in log, 150; outside
// the points, the nearest end's rate; no table, the fallback.
TEST(PlanCompute, GemmRateByHand) {
  const std::vector<sm::GemmPoint> t = {{1e9, 100e12}, {1e11, 200e12}};
  EXPECT_NEAR(sm::gemm_rate(t, 1e10, 1), 150e12, 1e3);
  EXPECT_DOUBLE_EQ(sm::gemm_rate(t, 1e6, 1), 100e12);
  EXPECT_DOUBLE_EQ(sm::gemm_rate(t, 1e13, 1), 200e12);
  EXPECT_DOUBLE_EQ(sm::gemm_rate({}, 1e10, 7), 7);
}

// The tiny block's 8 rows: QKV 2 x 8 x 6 x 2 x 4 = 768, projection 2 x 8 x 4 x 4 = 256, fc1 and
// fc2 2 x 8 x 16 x 4 = 1024 each: 3072 FLOPs. With every GEMM under the table's first point
// (1e4 FLOPs at 1e12) each runs at 1e12: 3072 / 1e12 s; with no table, at F.
TEST(PlanCompute, GemmListAndSecondsByHand) {
  const sm::MeshBlock m = tiny_block();
  const std::vector<double> g = sm::mesh_gemm_list(m);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_DOUBLE_EQ(g[0], 768);
  EXPECT_DOUBLE_EQ(g[1], 256);
  EXPECT_DOUBLE_EQ(g[2], 1024);
  EXPECT_DOUBLE_EQ(g[3], 1024);
  EXPECT_DOUBLE_EQ(sm::mesh_gemm_seconds(m, {{1e4, 1e12}}, 5e12), 3072 / 1e12);
  EXPECT_DOUBLE_EQ(sm::mesh_gemm_seconds(m, {}, 5e12), 3072 / 5e12);
}

// The tiny block (n 8 rows, h 4, e 2; hidden 8 x 16 = 128): forward LayerNorms 2 x 2 x 8 x 4 x 2
// = 256, dropout-adds 2 x 8 x 4 x 7 = 448, GeLU 2 x 128 x 2 = 512: 1216. Backward 2 x 3 x 64 =
// 384, 2 x 32 x 5 = 320, 3 x 128 x 2 = 768: 1472. Unfused attention's S = 8 x 8 x 2 = 128
// scores: forward + 2 x 128 x 2 + 128 x 5 = 1152, backward + 3 x 128 x 2 + 640 = 1408.
TEST(PlanCompute, ElementwiseBytesByHand) {
  const sm::MeshBlock m = tiny_block();
  const sm::ElementwiseBytes fused = sm::mesh_elementwise_bytes(m, false);
  EXPECT_DOUBLE_EQ(fused.forward, 1216);
  EXPECT_DOUBLE_EQ(fused.backward, 1472);
  const sm::ElementwiseBytes unfused = sm::mesh_elementwise_bytes(m, true);
  EXPECT_DOUBLE_EQ(unfused.forward, 1216 + 1152);
  EXPECT_DOUBLE_EQ(unfused.backward, 1472 + 1408);
  // Unfused attention's two GEMMs over the whole 8 x 8 scores: 4 x 8 x 8 x 4 = 1024 FLOPs.
  EXPECT_DOUBLE_EQ(sm::unfused_attention_flops(m), 1024);
}

// Adam: 4 + 24 + 2 = 30 bytes a parameter; 1000 parameters over 4 shards: 7500.
TEST(PlanCompute, OptimizerStepBytesByHand) {
  EXPECT_DOUBLE_EQ(sm::optimizer_step_bytes(1000, 1), 30000);
  EXPECT_DOUBLE_EQ(sm::optimizer_step_bytes(1000, 4), 7500);
}

// One GPU, one layer, no vocabulary: the plan's step is the block's step. With hbm_bw the
// block's compute grows by the non-matrix bytes (forward 1216 + backward 1472 B a micro-batch
// of one sequence, the tiny block's) over hbm_bw, and the step by Adam's 30 bytes a parameter
// (208 dense: LayerNorms 16, QKV 48, projection 16, MLP 128) once.
TEST(PlanCompute, PlanChargesTheMemoryBoundTerms) {
  sm::ModelSpec md;
  md.h = 4, md.a = 2, md.n_kv = 2, md.d_ff = 16, md.layers = 1;
  sm::JobSpec job;
  job.s = 8, job.global_tokens = 8, job.gpus = 1, job.memory_bytes = 1e12, job.max_pp = 1;
  sm::Cluster cl{1, sm::same_rates({1e11, 1e-6}), sm::same_rates({1e10, 5e-6}), 1e13, 1e13, 1e13};
  const auto order = std::vector{suite::parse_mesh_order("tp,cp,ep,dp")};
  const sm::PlanEntry before = sm::plan_meshes(md, job, cl, order).front();
  cl.hbm_bw = 1e9;
  const sm::PlanEntry after = sm::plan_meshes(md, job, cl, order).front();
  EXPECT_NEAR(after.block.compute - before.block.compute, (1216 + 1472) / 1e9, 1e-15);
  EXPECT_NEAR(after.step_s - before.step_s, (1216 + 1472) / 1e9 + 30 * 208 / 1e9, 1e-15);
}

// The overlap's exposed part: A 3 s of all-to-all beside X 2 s of compute over M 4
// micro-batches: max 3 + min 2 / 4 = 3.5 s in all, 1.5 s more than the compute.
TEST(PlanCompute, EpOverlapByHand) {
  EXPECT_DOUBLE_EQ(sm::moe_overlap_step(3, 2, 4) - 2, 1.5);
}

// The planner's pipeline term (common/formulas/plan_pipeline.hpp) and its use in plan_meshes,
// against timelines and counts worked out by hand here.
#include <gtest/gtest.h>

#include "common/formulas/mesh_plan.hpp"
#include "common/formulas/plan_pipeline.hpp"

namespace pp = suite::pipeline;
namespace sm = suite::model;
using pp::ScheduleKind;

namespace {

const pp::OpCosts kNothing{0, 0, 0};

// F = B = W = 1 a layer, equal stages, no hop.
sm::PipelineTime unit_time(const pp::ScheduleSpec& spec, int layers) {
  sm::PipelineTimer timer;
  return timer.time(spec, layers, {1, 1, 1}, kNothing, kNothing, 0);
}

}  // namespace

// 1F1B, p 2, m 2, one layer a stage, F = B = W = 1 (BW 2), no hop. By hand: rank 0 F0 [0,1]
// F1 [1,2]; rank 1 F0 [1,2] BW0 [2,4] F1 [4,5] BW1 [5,7]; rank 0 BW0 [4,6] BW1 [7,9]: 9, each
// rank busy 6, rank 0 holding both micro-batches after F1.
TEST(PlanPipeline, OneFOneBByHand) {
  const sm::PipelineTime t = unit_time({ScheduleKind::one_f_one_b, 2, 2, 1}, 2);
  EXPECT_DOUBLE_EQ(t.step, 9);
  EXPECT_DOUBLE_EQ(t.busy, 6);
  EXPECT_EQ(t.peak_chunks, 2);
}

// The same with a hop of 0.5: rank 1's F0 starts at 1.5, its BW1 ends at 7.5, rank 0's BW1
// runs [8,10]: two hops on the path.
TEST(PlanPipeline, HopsByHand) {
  sm::PipelineTimer timer;
  EXPECT_DOUBLE_EQ(
      timer.time({ScheduleKind::one_f_one_b, 2, 2, 1}, 2, {1, 1, 1}, kNothing, kNothing, 0.5).step,
      10);
}

// The last stage's output layer (its forward 1 more): rank 1's F0 [1,3] BW0 [3,5] F1 [5,7]
// BW1 [7,9]; rank 0's BW1 [9,11].
TEST(PlanPipeline, LastStageByHand) {
  sm::PipelineTimer timer;
  EXPECT_DOUBLE_EQ(
      timer.time({ScheduleKind::one_f_one_b, 2, 2, 1}, 2, {1, 1, 1}, kNothing, {1, 0, 0}, 0).step,
      11);
}

// Interleaved, p 2, v 2, m 2, four layers (one a chunk): each rank 2 x 2 chunk ops of 3, and
// METHODS.md 7's bubble (p - 1)(F + B + W) of a chunk op: 12 + 3.
TEST(PlanPipeline, InterleavedAgainstTheClosedForm) {
  const sm::PipelineTime t = unit_time({ScheduleKind::interleaved, 2, 2, 2}, 4);
  EXPECT_DOUBLE_EQ(t.busy, 12);
  EXPECT_DOUBLE_EQ(t.step, 15);
}

// A chunk's layers round up: Llama 3 405B's 126 layers over 16 stages hold 8 (the slowest
// stage paces the pipeline), over 16 x 2 chunks 4.
TEST(PlanPipeline, LayersPerChunkRoundUp) {
  EXPECT_EQ(sm::layers_per_chunk(126, {ScheduleKind::one_f_one_b, 16, 16, 1}), 8);
  EXPECT_EQ(sm::layers_per_chunk(126, {ScheduleKind::interleaved, 16, 16, 2}), 4);
  EXPECT_EQ(sm::layers_per_chunk(128, {ScheduleKind::interleaved, 16, 16, 8}), 1);
}

// p 4, 16 layers: 1F1B, interleaved at v 2, 3, 4 (p v <= 16), ZB-H1 and ZB-V at m 8; at m 6
// interleaved drops out (m not a multiple of p); --chunks 2 keeps v 2 only.
TEST(PlanPipeline, Candidates) {
  const std::vector<ScheduleKind> all = {ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                                         ScheduleKind::zb_h1, ScheduleKind::zb_v};
  EXPECT_EQ(sm::pipeline_candidates(all, 0, 4, 8, 16).size(), 6u);
  EXPECT_EQ(sm::pipeline_candidates(all, 0, 4, 6, 16).size(), 3u);
  EXPECT_EQ(sm::pipeline_candidates(all, 2, 4, 8, 16).size(), 4u);
}

// Two GPUs, one a node, 2 layers, 2 sequences a step: the PP 2 1F1B mesh's step is 1F1B's
// (m + p - 1) layer steps and its two hops (one activation of s h e bytes across the network
// each way), with nothing to sum over DP; it holds both micro-batches of its one layer.
TEST(PlanMeshes, PipelineStepFromTheBlock) {
  sm::ModelSpec md;
  md.h = 64, md.a = 4, md.n_kv = 4, md.d_ff = 256, md.layers = 2;
  sm::JobSpec job;
  job.s = 128, job.global_tokens = 256, job.gpus = 2, job.memory_bytes = 1e12;
  job.schedules = {ScheduleKind::one_f_one_b};
  sm::Cluster cl{1, sm::same_rates({1e11, 1e-6}), sm::same_rates({1e10, 5e-6}), 1e13, 1e13, 1e13};
  const auto plan = sm::plan_meshes(md, job, cl, {suite::parse_mesh_order("tp,cp,ep,dp")});
  const sm::PlanEntry* pipe = nullptr;
  for (const auto& e : plan)
    if (e.PP == 2) pipe = &e;
  ASSERT_NE(pipe, nullptr);
  EXPECT_EQ(pipe->D, 1);
  EXPECT_EQ(pipe->name(), "tp1-cp1-pp2:1f1b-dp1 tp,cp,ep,dp");
  const double hop = 5e-6 + 128.0 * 64 * 2 / 1e10;
  EXPECT_NEAR(pipe->step_s, 3 * pipe->block.step + 2 * hop, 1e-12);
  EXPECT_NEAR(pipe->pp_s, 1 * pipe->block.step + 2 * hop, 1e-12);
  EXPECT_EQ(pipe->peak_chunks, 2);
  EXPECT_EQ(pipe->layers_per_chunk, 1);
}

// A long step extends the path of a short one by whole periods of p micro-batches: 1F1B's
// (m + p - 1)(F + B + W) at m 64, p 4 (201 at F = B = W = 1), interleaved's 3 m v + 3 (p - 1)
// at v 2 (393); and at m 40 with unequal F, B, W and a hop, each schedule's extension equals
// the critical path of its whole graph.
TEST(PlanPipeline, LongStepsExtendByPeriods) {
  EXPECT_DOUBLE_EQ(unit_time({ScheduleKind::one_f_one_b, 4, 64, 1}, 4).step, 3.0 * (64 + 3));
  EXPECT_DOUBLE_EQ(unit_time({ScheduleKind::interleaved, 4, 64, 2}, 8).step, 3.0 * 64 * 2 + 3 * 3);
  for (ScheduleKind k : {ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zb_h1,
                         ScheduleKind::zb_v}) {
    const int v = pp::default_chunks(k);
    const pp::ScheduleSpec spec{k, 4, 40, v};
    const pp::Schedule s = pp::make_schedule(spec);
    const double full =
        pp::critical_path(s, pp::build_graph(s), pp::uniform({1, 0.7, 0.4}), 0.3).step;
    sm::PipelineTimer fresh;  // one layer a chunk: a chunk op is one layer's F, B, W
    EXPECT_NEAR(fresh.time(spec, 4 * v, {1, 0.7, 0.4}, kNothing, kNothing, 0.3).step, full, 1e-9)
        << pp::schedule_name(k);
  }
}

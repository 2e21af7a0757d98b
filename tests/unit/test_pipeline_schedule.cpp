// The pipeline schedules against METHODS.md section 7's closed forms, worked out here from the
// formulas (F = B = W = 1 per chunk op, no hop), and against the counts every schedule must keep.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "common/formulas/pipeline_graph.hpp"
#include "common/formulas/pipeline_schedule.hpp"
#include "common/harness/errors.hpp"

namespace pp = suite::pipeline;
using pp::ScheduleKind;

namespace {

double unit_step(const pp::Schedule& s) {
  const pp::ScheduleGraph g = pp::build_graph(s);
  return pp::critical_path(s, g, pp::uniform({1, 1, 1}), 0).step;
}

pp::Schedule make(ScheduleKind kind, int p, int m, int v = 1) {
  return pp::make_schedule({kind, p, m, v});
}

}  // namespace

// GPipe and 1F1B: (m + p - 1)(F + B + W), any m.
TEST(PipelineSchedule, GpipeAndOneFOneBStep) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 12; ++m)
      for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
        EXPECT_DOUBLE_EQ(unit_step(make(k, p, m)), 3.0 * (m + p - 1))
            << pp::schedule_name(k) << " p=" << p << " m=" << m;
}

// Interleaved: bubble (p - 1)(F + B + W)/v with a whole stage's F = v chunk ops, so
// 3 (p - 1) chunk units beside 3 m v of work.
TEST(PipelineSchedule, InterleavedStep) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 4 * p; m += p)
        EXPECT_DOUBLE_EQ(unit_step(make(ScheduleKind::interleaved, p, m, v)),
                         3.0 * m * v + 3.0 * (p - 1))
            << "p=" << p << " v=" << v << " m=" << m;
}

// ZB-H1: bubble (p - 1)(F + B - W) = p - 1 beside 3 m of work, for m >= p.
TEST(PipelineSchedule, ZbH1Step) {
  for (int p = 1; p <= 8; ++p)
    for (int m = p; m <= 3 * p + 2; ++m)
      EXPECT_DOUBLE_EQ(unit_step(make(ScheduleKind::zb_h1, p, m)), 3.0 * m + (p - 1))
          << "p=" << p << " m=" << m;
}

// ZB-V: 6 m chunk ops per rank; the last rank cannot start before p - 1 forwards have passed,
// and nothing else is idle: step 6 m + p - 1 for m >= 2 p.
TEST(PipelineSchedule, ZbVStep) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 2 * p; m <= 4 * p; ++m)
      EXPECT_DOUBLE_EQ(unit_step(make(ScheduleKind::zb_v, p, m, 2)), 6.0 * m + (p - 1))
          << "p=" << p << " m=" << m;
}

// Every schedule: an acyclic graph, and on each stage each micro-batch's F, B and W exactly once
// (BW counting as one B and one W), on the rank that holds the stage.
TEST(PipelineSchedule, EveryOpOnceAndAcyclic) {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zb_h1, ScheduleKind::zb_v})
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 2 * p + 3; ++m) {
        const int v = pp::default_chunks(k);
        if (!pp::check_schedule({k, p, m, v}).empty()) continue;
        const pp::Schedule s = make(k, p, m, v);
        EXPECT_FALSE(pp::build_graph(s).topological.empty());
        std::map<std::tuple<char, int, int>, int> count;  // (kind, stage, mb)
        for (int r = 0; r < p; ++r)
          for (const pp::Op& op : s.ranks[r]) {
            const int stage = s.stage_of(r, op.chunk);
            ASSERT_EQ(s.rank_of(stage), r);
            ASSERT_EQ(s.chunk_of(stage), op.chunk);
            if (op.kind == pp::OpKind::F) ++count[{'F', stage, op.microbatch}];
            if (op.kind == pp::OpKind::B || op.kind == pp::OpKind::BW)
              ++count[{'B', stage, op.microbatch}];
            if (op.kind == pp::OpKind::W || op.kind == pp::OpKind::BW)
              ++count[{'W', stage, op.microbatch}];
          }
        EXPECT_EQ(count.size(), 3u * p * v * m) << pp::schedule_name(k) << " p=" << p;
        for (const auto& [key, n] : count)
          EXPECT_EQ(n, 1);
      }
}

// A rank order that waits on itself is a cycle: the evaluator refuses it.
TEST(PipelineSchedule, CycleIsRefused) {
  pp::Schedule s = make(ScheduleKind::one_f_one_b, 2, 2);
  std::swap(s.ranks[1][0], s.ranks[1][1]);  // last stage: its BW before the F it needs
  const pp::ScheduleGraph g = pp::build_graph(s);
  EXPECT_TRUE(g.topological.empty());
  EXPECT_THROW(pp::critical_path(s, g, pp::uniform({}), 0), suite::UsageError);
}

// Hops: 1F1B with t_c per hop adds 2 (p - 1) t_c to the fill and drain, by hand for p = 2, m = 1:
// F, hop, F, BW, hop, BW.
TEST(PipelineSchedule, HopsOnTheCriticalPath) {
  const pp::Schedule s = make(ScheduleKind::one_f_one_b, 2, 1);
  const pp::Timeline t = pp::critical_path(s, pp::build_graph(s), pp::uniform({1, 2, 3}), 0.5);
  EXPECT_DOUBLE_EQ(t.step, 1 + 0.5 + 1 + 5 + 0.5 + 5);
  EXPECT_DOUBLE_EQ(t.bubble(), t.step - 6);
}

// In flight: GPipe m; 1F1B min(p - r, m); ZB-H1 1F1B's peak, p, on every rank (its deferred W's
// hold activations); ZB-V the same p stages' worth, 2 p chunks.
TEST(PipelineSchedule, PeakInFlight) {
  EXPECT_EQ(pp::peak_in_flight(make(ScheduleKind::gpipe, 4, 6)), (std::vector<int>{6, 6, 6, 6}));
  EXPECT_EQ(pp::peak_in_flight(make(ScheduleKind::one_f_one_b, 4, 6)),
            (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(pp::peak_in_flight(make(ScheduleKind::one_f_one_b, 4, 2)),
            (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(pp::peak_in_flight(make(ScheduleKind::zb_h1, 4, 8)), (std::vector<int>{4, 4, 4, 4}));
  EXPECT_EQ(pp::peak_in_flight(make(ScheduleKind::zb_v, 4, 8, 2)), (std::vector<int>{8, 8, 8, 8}));
}

TEST(PipelineSchedule, BadInputNamesTheFlag) {
  EXPECT_THROW(pp::parse_schedule("dualpipe"), suite::UsageError);
  EXPECT_EQ(pp::parse_schedule("zb-v"), ScheduleKind::zb_v);
  EXPECT_NE(pp::check_schedule({ScheduleKind::one_f_one_b, 4, 8, 2}).find("--chunks 2"),
            std::string::npos);
  EXPECT_NE(pp::check_schedule({ScheduleKind::interleaved, 4, 6, 2}).find("--microbatches 6"),
            std::string::npos);
  EXPECT_NE(pp::check_schedule({ScheduleKind::zb_v, 4, 6, 3}).find("--chunks 3"),
            std::string::npos);
  EXPECT_TRUE(pp::check_schedule({ScheduleKind::zb_v, 4, 3, 2}).empty());
}

// A fused zero-bubble schedule (stages whose backward does not split): each micro-batch's F and
// one BW per stage, no W, its graph acyclic; the ops a rank holds in flight run from F to BW.
TEST(PipelineSchedule, FusedBackward) {
  for (auto [kind, v] : {std::pair{ScheduleKind::zb_h1, 1}, std::pair{ScheduleKind::zb_v, 2}})
    for (int m : {2, 4, 8}) {
      const pp::Schedule s = pp::fuse_backward(make(kind, 4, m, v));
      EXPECT_FALSE(s.split_backward());
      std::map<std::tuple<pp::OpKind, int, int>, int> seen;  // (kind, stage, mb) -> count
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(s.ranks[r].size(), static_cast<std::size_t>(2 * m * v));
        for (const pp::Op& op : s.ranks[r])
          ++seen[{op.kind, s.stage_of(r, op.chunk), op.microbatch}];
      }
      EXPECT_EQ(seen.size(), static_cast<std::size_t>(2 * 4 * v * m));
      for (const auto& [key, count] : seen) {
        EXPECT_EQ(count, 1);
        EXPECT_TRUE(std::get<0>(key) == pp::OpKind::F || std::get<0>(key) == pp::OpKind::BW);
      }
      const pp::Timeline t = pp::critical_path(s, pp::build_graph(s), pp::uniform({1, 1, 1}), 0);
      EXPECT_GE(t.step, 3.0 * m * v);
      for (int held : pp::peak_in_flight(s))
        EXPECT_LE(held, m * v);
    }
}

// The pipeline's hop channels (bench/pipeline/hop_channels.hpp): for every schedule the
// generator yields, fused and not, each channel's sender and receiver issue its micro-batches in
// one order, and a transport that matches messages in issue order (NCCL send/recv) runs every
// rank to its last op. A channel put out of order must fail both.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "bench/pipeline/hop_channels.hpp"

namespace pp = suite::pipeline;
using pp::ScheduleKind;

namespace {

// Every spec of the grid: p in {2, 3, 4, 8}; m = p, 2 p and (where the schedule takes it) p - 1;
// the chunks each schedule runs (interleaved also 3).
std::vector<pp::ScheduleSpec> grid() {
  std::vector<pp::ScheduleSpec> specs;
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                            ScheduleKind::interleaved, ScheduleKind::zb_h1, ScheduleKind::zb_v})
    for (int p : {2, 3, 4, 8})
      for (int m : {p - 1, p, 2 * p})
        for (int v : {1, 2, 3}) {
          const pp::ScheduleSpec spec{kind, p, m, v};
          if (pp::check_schedule(spec).empty()) specs.push_back(spec);
        }
  return specs;
}

std::string label(const pp::Schedule& s) {
  return std::string(pp::schedule_name(s.spec.kind)) + (s.fused ? " fused" : "") +
         " p=" + std::to_string(s.spec.ranks) + " m=" + std::to_string(s.spec.microbatches) +
         " v=" + std::to_string(s.spec.chunks);
}

std::vector<pp::Schedule> every_schedule() {
  std::vector<pp::Schedule> all;
  for (const pp::ScheduleSpec& spec : grid()) {
    all.push_back(pp::make_schedule(spec));
    all.push_back(pp::fuse_backward(pp::make_schedule(spec)));
  }
  return all;
}

std::vector<int> zero_to(int m) {
  std::vector<int> all(m);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

}  // namespace

// The grid holds every schedule with m < p where it may (interleaved may not).
TEST(PipelineHopChannels, GridCoversEverySchedule) {
  int below_p = 0, interleaved = 0, zb_v = 0;
  for (const pp::ScheduleSpec& spec : grid()) {
    below_p += spec.microbatches < spec.ranks;
    interleaved += spec.kind == ScheduleKind::interleaved;
    zb_v += spec.kind == ScheduleKind::zb_v;
  }
  EXPECT_EQ(below_p, 4 * 4);          // gpipe, 1f1b, zb-h1, zb-v at each p
  EXPECT_EQ(interleaved, 4 * 2 * 2);  // m = p, 2 p; v = 2, 3
  EXPECT_EQ(zb_v, 4 * 3);
}

// (a) Each channel carries every micro-batch once, in the same order at both ends.
TEST(PipelineHopChannels, SenderAndReceiverAgree) {
  for (const pp::Schedule& s : every_schedule()) {
    for (const pp::ChannelOrder& c : pp::hop_channels(s)) {
      EXPECT_NE(c.sender, c.receiver) << label(s);
      EXPECT_EQ(c.sent, c.received) << label(s) << " channel " << c.channel.index();
      std::vector<int> sorted = c.sent;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, zero_to(s.spec.microbatches)) << label(s);
    }
  }
}

// Channels counted by hand: two per boundary between ranks; zb-v's turn (stages p - 1 and p on
// the last rank) has none.
TEST(PipelineHopChannels, ChannelCounts) {
  EXPECT_EQ(pp::hop_channels(pp::make_schedule({ScheduleKind::one_f_one_b, 4, 8, 1})).size(), 6u);
  EXPECT_EQ(pp::hop_channels(pp::make_schedule({ScheduleKind::interleaved, 2, 4, 2})).size(), 6u);
  const auto v = pp::hop_channels(pp::make_schedule({ScheduleKind::zb_v, 3, 6, 2}));
  ASSERT_EQ(v.size(), 8u);  // 5 boundaries, one of them local
  for (const pp::ChannelOrder& c : v)
    EXPECT_NE(c.channel.boundary, 2);
  EXPECT_TRUE(pp::hop_channels(pp::make_schedule({ScheduleKind::gpipe, 1, 4, 1})).empty());
}

// (b) Matched in issue order, no rank waits for good.
TEST(PipelineHopChannels, RendezvousCompletes) {
  for (const pp::Schedule& s : every_schedule())
    EXPECT_EQ(pp::rendezvous_stall(s), "") << label(s);
}

// GPipe at p = 2: rank 0 sends micro-batch 1's activation before 0's, rank 1 takes 0's first.
TEST(PipelineHopChannels, MisorderedForwardFails) {
  pp::Schedule s = pp::make_schedule({ScheduleKind::gpipe, 2, 2, 1});
  std::swap(s.ranks[0][0], s.ranks[0][1]);
  const auto channels = pp::hop_channels(s);
  ASSERT_EQ(channels.size(), 2u);
  EXPECT_EQ(channels[0].sent, (std::vector<int>{1, 0}));
  EXPECT_EQ(channels[0].received, (std::vector<int>{0, 1}));
  const std::string stall = pp::rendezvous_stall(s);
  EXPECT_NE(stall.find("rank 1 waits at op 0 (F of micro-batch 0) on stage 0 -> 1: its next "
                       "message is micro-batch 1"),
            std::string::npos)
      << stall;
}

// 1F1B at p = 3: the middle rank (F0 F1 BW0 F2 BW1 BW2) runs its backwards of micro-batches 0
// and 1 the other way round, so it takes 1's gradient while 0's is the next on its channel.
TEST(PipelineHopChannels, MisorderedBackwardFails) {
  pp::Schedule s = pp::make_schedule({ScheduleKind::one_f_one_b, 3, 3, 1});
  auto& middle = s.ranks[1];
  ASSERT_EQ(middle[2], (pp::Op{pp::OpKind::BW, 0, 0}));
  ASSERT_EQ(middle[4], (pp::Op{pp::OpKind::BW, 1, 0}));
  std::swap(middle[2], middle[4]);
  int differ = 0;
  for (const pp::ChannelOrder& c : pp::hop_channels(s))
    differ += c.sent != c.received;
  EXPECT_EQ(differ, 2);  // the gradients into rank 1 and out of it
  const std::string stall = pp::rendezvous_stall(s);
  EXPECT_NE(stall.find("rank 1 waits at op 2 (BW of micro-batch 1) on stage 2 -> 1: its next "
                       "message is micro-batch 0"),
            std::string::npos)
      << stall;
}

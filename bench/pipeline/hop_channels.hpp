// The hops of a pipeline schedule grouped into channels: one per stage boundary and direction
// (activations from stage s to s + 1, their gradients from s + 1 back to s). A transport without
// tags (NCCL's send/recv) matches a channel's messages in the order they were issued, so both
// ends of each channel must issue its micro-batches in the same order, and no rank may wait for
// a message that sits behind one its receiver has not taken yet. hop_channels gives each
// channel's two orders, rendezvous_stall runs the schedule under those rules; both pure, so the
// unit tests hold every schedule the generator yields to them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/formulas/pipeline_schedule.hpp"

namespace suite::pipeline {

struct HopChannel {
  int boundary = 0;       // between stages boundary and boundary + 1
  bool backward = false;  // false: the activation forward; true: its gradient back
  int from_stage() const { return backward ? boundary + 1 : boundary; }
  int to_stage() const { return backward ? boundary : boundary + 1; }
  // 0 .. 2 (stages - 1) - 1: the forward and backward channel of each boundary in turn.
  int index() const { return 2 * boundary + (backward ? 1 : 0); }
  bool operator==(const HopChannel&) const = default;
};

// The channel an op of `rank` receives its input on and sends its output on; none for the
// first stage's input, the last stage's loss gradient, the first stage's input gradient and W.
std::optional<HopChannel> receive_channel(const Schedule& s, int rank, const Op& op);
std::optional<HopChannel> send_channel(const Schedule& s, int rank, const Op& op);
// Whether the channel's two stages sit on one rank (zb-v's turn): the hop stays in memory.
bool is_local(const Schedule& s, const HopChannel& c);

// A channel between two ranks and the micro-batches of its messages in the order the sender's
// ops send them and the receiver's ops take them.
struct ChannelOrder {
  HopChannel channel;
  int sender = 0, receiver = 0;
  std::vector<int> sent, received;
};

// Every channel between two ranks, by index().
std::vector<ChannelOrder> hop_channels(const Schedule& s);

// Runs every rank's ops in order, a send issued when its op runs and never waiting, a receive
// waiting until its message is the next of its channel (issued, every earlier one taken); a hop
// within a rank there once its producer ran. Empty when every rank reaches its last op,
// otherwise where each waiting rank stopped.
std::string rendezvous_stall(const Schedule& s);

}  // namespace suite::pipeline

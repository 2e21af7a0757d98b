#include "bench/pipeline/hop_channels.hpp"

#include <set>
#include <utility>

namespace suite::pipeline {

namespace {

std::string describe(const HopChannel& c) {
  return "stage " + std::to_string(c.from_stage()) + " -> " + std::to_string(c.to_stage());
}

}  // namespace

std::optional<HopChannel> receive_channel(const Schedule& s, int rank, const Op& op) {
  const int stage = s.stage_of(rank, op.chunk);
  if (op.kind == OpKind::F && stage > 0) return HopChannel{stage - 1, false};
  if (is_backward(op.kind) && stage < s.stages() - 1) return HopChannel{stage, true};
  return std::nullopt;
}

std::optional<HopChannel> send_channel(const Schedule& s, int rank, const Op& op) {
  const int stage = s.stage_of(rank, op.chunk);
  if (op.kind == OpKind::F && stage < s.stages() - 1) return HopChannel{stage, false};
  if (is_backward(op.kind) && stage > 0) return HopChannel{stage - 1, true};
  return std::nullopt;
}

bool is_local(const Schedule& s, const HopChannel& c) {
  return s.rank_of(c.from_stage()) == s.rank_of(c.to_stage());
}

std::vector<ChannelOrder> hop_channels(const Schedule& s) {
  std::vector<ChannelOrder> all;
  for (int b = 0; b + 1 < s.stages(); ++b)
    for (bool backward : {false, true}) {
      const HopChannel c{b, backward};
      all.push_back({c, s.rank_of(c.from_stage()), s.rank_of(c.to_stage()), {}, {}});
    }
  for (int r = 0; r < s.spec.ranks; ++r)
    for (const Op& op : s.ranks[r]) {
      if (const auto c = send_channel(s, r, op)) all[c->index()].sent.push_back(op.microbatch);
      if (const auto c = receive_channel(s, r, op))
        all[c->index()].received.push_back(op.microbatch);
    }
  std::vector<ChannelOrder> between_ranks;
  for (ChannelOrder& c : all)
    if (!is_local(s, c.channel)) between_ranks.push_back(std::move(c));
  return between_ranks;
}

std::string rendezvous_stall(const Schedule& s) {
  const int p = s.spec.ranks, channels = 2 * s.stages();
  std::vector<std::size_t> next_op(p, 0);
  std::vector<std::vector<int>> issued(channels);  // micro-batches sent, in channel order
  std::vector<std::size_t> taken(channels, 0);     // how many of them were received
  std::set<std::pair<int, int>> kept;              // (channel, micro-batch) within a rank
  // Whether rank r's next op may take its input now (taking it if so).
  const auto take_input = [&](int r, const Op& op) {
    const auto c = receive_channel(s, r, op);
    if (!c) return true;
    const int i = c->index();
    if (is_local(s, *c)) return kept.erase({i, op.microbatch}) == 1;
    if (taken[i] >= issued[i].size() || issued[i][taken[i]] != op.microbatch) return false;
    ++taken[i];
    return true;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r)
      for (; next_op[r] < s.ranks[r].size(); ++next_op[r], moved = true) {
        const Op& op = s.ranks[r][next_op[r]];
        if (!take_input(r, op)) break;
        if (const auto c = send_channel(s, r, op)) {
          if (is_local(s, *c))
            kept.insert({c->index(), op.microbatch});
          else
            issued[c->index()].push_back(op.microbatch);
        }
      }
  }
  std::string stall;
  for (int r = 0; r < p; ++r) {
    if (next_op[r] == s.ranks[r].size()) continue;
    const Op& op = s.ranks[r][next_op[r]];
    const HopChannel c = *receive_channel(s, r, op);
    const int i = c.index();
    const std::string next = taken[i] < issued[i].size() ? "its next message is micro-batch " +
                                                               std::to_string(issued[i][taken[i]])
                                                         : "no message waits";
    stall += (stall.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
             " waits at op " + std::to_string(next_op[r]) + " (" + op_name(op.kind) +
             " of micro-batch " + std::to_string(op.microbatch) + ") on " + describe(c) + ": " +
             next;
  }
  return stall;
}

}  // namespace suite::pipeline

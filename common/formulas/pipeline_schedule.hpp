// Pipeline-parallel schedules (METHODS.md section 7): each rank's ordered ops. One generator for
// the pipeline benchmark that runs them, and model and the planner that predict from them
// (common/formulas/pipeline_graph.hpp evaluates a schedule's critical path).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace suite::pipeline {

// F forward; B the input gradient; W the weight gradients; BW the whole backward (B then W in one
// op, as GPipe, 1F1B and Megatron's interleaved schedule run it).
enum class OpKind : std::uint8_t { F, B, W, BW };
const char* op_name(OpKind kind);  // "F", "B", "W", "BW"
// Whether the op carries a gradient back to the stage before (B, or BW fused).
inline bool is_backward(OpKind kind) {
  return kind == OpKind::B || kind == OpKind::BW;
}

// One op of a rank: its kind, its micro-batch (0..m-1) and its chunk on the rank (0..v-1).
struct Op {
  OpKind kind;
  int microbatch;
  int chunk;
  bool operator==(const Op&) const = default;
};

// gpipe: all forwards, then all backwards. 1f1b: warm-up forwards, then one forward one
// backward. interleaved: Megatron's 1F1B over v chunks per rank placed round robin. zb-h1:
// 1F1B's order and memory with the backward split, W deferred into the bubble. zb-v: two chunks
// per rank placed V-shaped (rank r holds stages r and 2p-1-r), B and W split.
enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1, zb_v };

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int ranks = 1;         // p, the PP group
  int microbatches = 1;  // m per step
  int chunks = 1;        // v per rank: interleaved any v >= 1, zb-v 2, the others 1
};

const char* schedule_name(ScheduleKind kind);
// Every schedule's name, in the order above (for --schedule's help and `model`).
const std::vector<std::string>& schedule_names();
// "1f1b" -> one_f_one_b; UsageError naming --schedule and the known names otherwise.
ScheduleKind parse_schedule(const std::string& name);
// The chunks a schedule runs when --chunks is left at 0: zb-v 2, interleaved 2, the others 1.
int default_chunks(ScheduleKind kind);
// True when the backward is split into B and W (zb-h1, zb-v).
bool splits_backward(ScheduleKind kind);

// Empty when the schedule can run; otherwise one line naming the flag and the numbers (--chunks
// on a schedule without chunks or zb-v's other than 2, interleaved's --microbatches not a
// multiple of --pp, non-positive sizes).
std::string check_schedule(const ScheduleSpec& spec);

// A schedule: each rank's ops in the order it runs them, and where each chunk sits.
struct Schedule {
  ScheduleSpec spec;
  std::vector<std::vector<Op>> ranks;  // [rank][position]

  // B and W run as one BW in the zero-bubble schedules' order (fuse_backward).
  bool fused = false;

  int stages() const { return spec.ranks * spec.chunks; }
  // Whether its backward runs as B and W apart.
  bool split_backward() const { return splits_backward(spec.kind) && !fused; }
  // The model stage (0 = first layers) of a rank's chunk, and back.
  int stage_of(int rank, int chunk) const;
  int rank_of(int stage) const;
  int chunk_of(int stage) const;
};

// The schedule's ops; check_schedule(spec) must be empty (UsageError otherwise).
Schedule make_schedule(const ScheduleSpec& spec);
// The schedule with each B run as the whole backward (BW) and its W dropped: the order of a
// zero-bubble schedule for stages whose backward does not split.
Schedule fuse_backward(Schedule schedule);

// Peak micro-batch chunks whose activations a rank holds at once (from its F until its BW, or
// its W when the backward is split: a deferred W keeps its GEMMs' inputs), per rank.
std::vector<int> peak_in_flight(const Schedule& schedule);

}  // namespace suite::pipeline

// --overlap microbatch:M (METHODS.md section 4, "Hiding the all-to-all behind another
// micro-batch"): the rank's T tokens cut into M micro-batches of T / M, each a MoeLayer on its
// rows of the whole layer's buffers (MicrobatchOf), run as a software pipeline over the network
// and the compute: micro-batch i+1 is dispatched while i's experts compute and i-1 is combined;
// the backward overlaps its two exchanges the same way. The exchanges start without waiting
// (Comm::start_all_to_all_v: nonblocking on MPI with host buffers and on NCCL; where the
// transport runs them blocking, the micro-batches run one after another). The program is written
// once (forward_program, backward_program) and run three ways: for real, eagerly (each exchange
// waited for at once, every piece timed alone) and replayed on those times (the critical path of
// the schedule actually run).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/moe/moe_layer.hpp"

namespace suite::moe {

// A pass's pieces: compute on this rank, and exchanges started and finished.
enum class Work { route, permute, expert, bwd_expert, bwd_router };
enum class Exchange { dispatch, combine, bwd_combine, bwd_dispatch };
const char* work_name(Work w);
const char* exchange_name(Exchange x);

struct PipelineHooks {
  std::function<void(int, Work)> compute;
  std::function<void(int, Exchange)> start, finish;
};
// The order of one pass over m micro-batches.
void forward_program(int m, const PipelineHooks& h);
void backward_program(int m, const PipelineHooks& h);

// One piece of a pass in the order it ran: compute on the rank, or the exchange `key` started
// (taking `seconds` on the network) or finished.
struct SchedulePiece {
  enum class Kind { compute, start, finish } kind = Kind::compute;
  std::string key;
  double seconds = 0;
};
// The critical path of such a schedule: compute runs in order on the rank; a started exchange
// runs on the network after the exchanges started before it, and finishing waits for it; where
// the exchanges block (overlapped false), starting one waits for it.
double schedule_critical_path(const std::vector<SchedulePiece>& pieces, bool overlapped);

// The same for a program whose pieces took `seconds` ("expert#2", "dispatch#0", ...) alone.
double critical_path(int m, bool backward, const std::map<std::string, double>& seconds,
                     bool overlapped = true);

// The eager run's times, the group's (each compute piece its slowest rank's, each exchange
// its last-arriving rank's): all-to-all A and compute X summed over the micro-batches (both
// passes where the step has both), and the critical path with them.
struct PipelineProfile {
  double a2a_s = 0, compute_s = 0, pred_step_s = 0;
};

class MicrobatchPipeline {
 public:
  // owner: the whole rank's layer (cfg.microbatches = M of its config), whose input, output,
  // weights and gradients the micro-batches work on.
  MicrobatchPipeline(MoeLayer& owner, Device& device, Comm& group, MoeOps& ops,
                     std::int64_t first_token, NodeComms comms);

  int microbatches() const { return static_cast<int>(mbs_.size()); }
  // Whether the exchanges start without waiting (hierarchical dispatch: its rail level; the
  // node level blocks): on a transport that can.
  bool overlapped() const;
  // How the exchanges start (the transport's words, for the results).
  std::string overlap_mechanism() const;
  void set_select_bias(const std::vector<float>& bias);
  // The owner's placement (EPLB's, once set there); the last micro-batch all-reduces the
  // replicas' gradients once every micro-batch has added its own.
  void follow_placement();
  void forward(PhaseTimer& phases);
  void backward(PhaseTimer& phases);
  // The pieces of a pass one by one, for a caller that runs its own program (the mesh's block
  // beside its attention): begin_pass first, then the hooks' calls (eager: each exchange
  // waited for at once, every piece timed alone under "<name>#<micro-batch>").
  void begin_pass(bool backward);
  PipelineHooks hooks(PhaseTimer& phases, bool eager);
  // One step run eagerly (untimed by the harness): per-piece times and the prediction.
  // Collective over the group.
  PipelineProfile profile();

  // Summed over the micro-batches (the last pass of each).
  StepBytes measured_bytes() const;
  StepBytes implied_bytes() const;
  StepBytes measured_bwd_bytes() const;
  StepBytes implied_bwd_bytes() const;
  std::string level_mismatch() const;
  // Copies dropped in each micro-batch (under a capacity factor, its share of the capacity).
  std::vector<std::int64_t> drops() const;
  // The micro-batches' routing, concatenated in token order ([T, k]).
  std::vector<std::int32_t> chosen() const;
  std::vector<std::uint8_t> keep() const;
  std::vector<float> gate_grad() const;

 private:
  void run(bool backward, PhaseTimer& phases);
  void compute(int i, Work w);
  // Copies per expert the rank's first `count` micro-batches routed (drops included).
  std::vector<double> routed_by(int count) const;

  MoeLayer& owner_;
  std::vector<std::unique_ptr<MoeLayer>> mbs_;
  std::vector<float> prob_grad_;  // the aux loss's, over the whole rank's routing
};

}  // namespace suite::moe

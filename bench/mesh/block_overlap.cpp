#include "bench/mesh/block_overlap.hpp"

#include <mpi.h>

#include <string>

#include "common/harness/errors.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::mesh {

using moe::Exchange;
using moe::Work;
using Kind = moe::SchedulePiece::Kind;

class TwoBatchSchedule::Part final : public sp_tp::FfnPart {
 public:
  Part(TwoBatchSchedule& s, int i) : s_(s), i_(i) {}
  void forward(const void* in, void* out, PhaseTimer& phases) override {
    s_.moe_.copy_input(in, i_, phases);
    i_ == 0 ? s_.forward_first(phases) : s_.forward_second(phases);
    s_.moe_.copy_output(out, i_, phases);
  }
  void backward(const void* d_out, void* d_in, PhaseTimer& phases) override {
    s_.moe_.copy_grad_output(d_out, i_, phases);
    i_ == 0 ? s_.backward_first(phases) : s_.backward_second(phases);
    s_.moe_.copy_grad_input(d_in, i_, phases);
  }

 private:
  TwoBatchSchedule& s_;
  int i_;
};

TwoBatchSchedule::TwoBatchSchedule(MoeFfn& moe, Device& device) : moe_(moe), device_(device) {
  SUITE_CHECK(moe.pipeline() && moe.pipeline()->microbatches() == 2, "two micro-batches");
  for (int i = 0; i < 2; ++i)
    parts_.push_back(std::make_unique<Part>(*this, i));
}

TwoBatchSchedule::~TwoBatchSchedule() = default;

sp_tp::FfnPart& TwoBatchSchedule::part(int i) {
  return *parts_.at(static_cast<std::size_t>(i));
}

void TwoBatchSchedule::set_second(std::function<void(PhaseTimer&)> forward,
                                  std::function<void(PhaseTimer&)> backward) {
  second_forward_ = std::move(forward);
  second_backward_ = std::move(backward);
}

// Micro-batch 0's dispatch travels while micro-batch 1's layer computes up to its MoE part.
void TwoBatchSchedule::forward_first(PhaseTimer& phases) {
  moe_.pipeline()->begin_pass(false);
  compute(phases, 0, Work::route);
  compute(phases, 0, Work::permute);
  start(phases, 0, Exchange::dispatch);
  second_forward_(phases);
}

// moe's forward_program for two micro-batches from micro-batch 1's route on.
void TwoBatchSchedule::forward_second(PhaseTimer& phases) {
  compute(phases, 1, Work::route);
  compute(phases, 1, Work::permute);
  finish(phases, 0, Exchange::dispatch);
  start(phases, 1, Exchange::dispatch);
  compute(phases, 0, Work::expert);
  start(phases, 0, Exchange::combine);
  finish(phases, 1, Exchange::dispatch);
  compute(phases, 1, Work::expert);
  start(phases, 1, Exchange::combine);
  finish(phases, 0, Exchange::combine);
  finish(phases, 1, Exchange::combine);
}

// Micro-batch 0's output gradients travel while micro-batch 1's backward reaches its MoE part.
void TwoBatchSchedule::backward_first(PhaseTimer& phases) {
  moe_.pipeline()->begin_pass(true);
  start(phases, 0, Exchange::bwd_combine);
  second_backward_(phases);
}

// The first micro-batch's router backward comes first: it takes the aux loss over both.
void TwoBatchSchedule::backward_second(PhaseTimer& phases) {
  finish(phases, 0, Exchange::bwd_combine);
  start(phases, 1, Exchange::bwd_combine);
  compute(phases, 0, Work::bwd_expert);
  start(phases, 0, Exchange::bwd_dispatch);
  finish(phases, 1, Exchange::bwd_combine);
  compute(phases, 1, Work::bwd_expert);
  start(phases, 1, Exchange::bwd_dispatch);
  finish(phases, 0, Exchange::bwd_dispatch);
  compute(phases, 0, Work::bwd_router);
  finish(phases, 1, Exchange::bwd_dispatch);
  compute(phases, 1, Work::bwd_router);
}

namespace {

std::string piece_key(const char* name, int i) {
  return std::string(name) + "#" + std::to_string(i);
}

}  // namespace

void TwoBatchSchedule::compute(PhaseTimer& phases, int i, Work w) {
  close_gap();
  const auto t0 = mark_;
  moe_.pipeline()->hooks(phases, eager_).compute(i, w);
  record(Kind::compute, piece_key(moe::work_name(w), i), t0);
}

void TwoBatchSchedule::start(PhaseTimer& phases, int i, Exchange x) {
  close_gap();
  const auto t0 = mark_;
  moe_.pipeline()->hooks(phases, eager_).start(i, x);  // eager: finished too
  record(Kind::start, piece_key(moe::exchange_name(x), i), t0);
}

void TwoBatchSchedule::finish(PhaseTimer& phases, int i, Exchange x) {
  close_gap();
  const auto t0 = mark_;
  moe_.pipeline()->hooks(phases, eager_).finish(i, x);
  record(Kind::finish, piece_key(moe::exchange_name(x), i), t0);
}

void TwoBatchSchedule::close_gap() {
  if (eager_) record(Kind::compute, "block", mark_);
}

void TwoBatchSchedule::record(Kind kind, std::string key, RunClock::time_point since) {
  if (!eager_) return;
  device_.synchronize();
  mark_ = RunClock::now();
  const double s = std::chrono::duration<double>(mark_ - since).count();
  trace_.push_back({kind, std::move(key), kind == Kind::finish ? 0.0 : s});
}

void TwoBatchSchedule::profile_begin() {
  eager_ = true;
  trace_.clear();
  device_.synchronize();
  mark_ = RunClock::now();
}

TwoBatchProfile TwoBatchSchedule::profile_end() {
  close_gap();
  eager_ = false;
  // The group runs each compute piece as its slowest rank and each exchange as its last rank to
  // arrive (the others' waits are not the network's): max over ranks, min for the exchanges.
  std::vector<double> v;
  std::vector<bool> exchange;
  for (const auto& p : trace_)
    v.push_back(p.seconds), exchange.push_back(p.kind == Kind::start);
  extreme_over_ranks(v, exchange, MPI_COMM_WORLD);
  TwoBatchProfile out;
  for (std::size_t i = 0; i < trace_.size(); ++i) {
    trace_[i].seconds = v[i];
    (exchange[i] ? out.a2a_s : out.compute_s) += v[i];
  }
  out.pred_step_s = moe::schedule_critical_path(trace_, moe_.pipeline()->overlapped());
  return out;
}

}  // namespace suite::mesh

#include "bench/pipeline/pipeline_executor.hpp"

#include <algorithm>
#include <chrono>

#include "common/harness/run_clock.hpp"
#include "common/sim/sim.hpp"

namespace suite::pipeline {

namespace {

constexpr int kLookahead = 2;  // receives posted this many ops ahead of the one running

double seconds_now() {
  return std::chrono::duration<double>(RunClock::now().time_since_epoch()).count();
}

}  // namespace

int stage_first_layer(int stage, int stages, int layers) {
  return stage * (layers / stages) + std::min(stage, layers % stages);
}

int stage_layer_count(int stage, int stages, int layers) {
  return layers / stages + (stage < layers % stages ? 1 : 0);
}

PipelineExecutor::PipelineExecutor(const Schedule& schedule, StageFactory make_stage, int layers,
                                   int rank, HopTransport& hops, int drop_microbatch,
                                   OpHooks* hooks)
    : schedule_(schedule),
      make_stage_(std::move(make_stage)),
      layers_(layers),
      hops_(hops),
      rank_(rank),
      drop_(drop_microbatch),
      hooks_(hooks) {
  find_hooked_ops();
}

void PipelineExecutor::find_hooked_ops() {
  first_forward_.assign(schedule_.spec.chunks, -1);
  last_weight_op_.assign(schedule_.spec.chunks, -1);
  const auto& ops = schedule_.ranks[rank_];
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const Op& op = ops[i];
    if (op.kind == OpKind::F && first_forward_[op.chunk] < 0) first_forward_[op.chunk] = i;
    if (op.kind == OpKind::W || op.kind == OpKind::BW) last_weight_op_[op.chunk] = i;
  }
}

void PipelineExecutor::post_receive(int index) {
  const auto& ops = schedule_.ranks[rank_];
  if (index >= static_cast<int>(ops.size()) || posted_.count(index)) return;
  const Op& op = ops[index];
  const auto c = receive_channel(schedule_, rank_, op);
  if (!c || is_local(schedule_, *c)) return;
  posted_.insert(index);
  hops_.post_receive(*c, op.microbatch, chunks_[op.chunk]->hop_values(),
                     schedule_.rank_of(c->from_stage()));
}

Rows PipelineExecutor::take_input(int index, const HopChannel& c) {
  const int mb = schedule_.ranks[rank_][index].microbatch;
  if (is_local(schedule_, c)) {
    const auto key = std::make_pair(c.index(), mb);
    Rows data = local_.at(key).take();
    local_.erase(key);
    return data;
  }
  post_receive(index);
  return hops_.wait_receive(c, mb, schedule_.rank_of(c.from_stage()));
}

void PipelineExecutor::send(const Op& op, const HopChannel& c, Rows data) {
  const std::size_t values = chunks_[op.chunk]->hop_values();
  if (is_local(schedule_, c)) {
    local_[{c.index(), op.microbatch}] = HopBuffer::holding(std::move(data), values);
    return;
  }
  hops_.post_send(c, op.microbatch, std::move(data), values, schedule_.rank_of(c.to_stage()));
  ++sends_;
}

void PipelineExecutor::run_op(int index) {
  const Op& op = schedule_.ranks[rank_][index];
  const int stage = schedule_.stage_of(rank_, op.chunk), last = schedule_.stages() - 1;
  const int mb = op.microbatch;
  Stage& layers = *chunks_[op.chunk];
  const bool keep = !(stage == 0 && mb == drop_);
  Rows input;
  if (const auto from = receive_channel(schedule_, rank_, op)) {
    input = take_input(index, *from);
  } else if (op.kind == OpKind::F) {  // the first stage's
    input = layers.input(mb);
  } else if (is_backward(op.kind)) {  // the last stage's: the loss gradient kept by its F
    input = loss_grads_.at(mb).take();
    loss_grads_.erase(mb);
  }
  const auto to = send_channel(schedule_, rank_, op);
  if (hooks_) hooks_->before(op, index == first_forward_[op.chunk]);
  OpSpan span{op, seconds_now(), 0};
  if (op.kind == OpKind::F) {
    Rows y = layers.forward(mb, input);
    if (stage == last) {  // loss 0.5 |y|^2: its gradient is y, kept for this stage's backward
      for (double v : y)
        loss_ += 0.5 * v * v;
      loss_grads_[mb] = HopBuffer::holding(std::move(y), layers.hop_values());
    } else {
      send(op, *to, std::move(y));
    }
  } else if (is_backward(op.kind)) {
    // A whole backward sends its gradient when it ends, weight gradients included, as an
    // autograd backward of the stage does (its first layer's input gradient comes last).
    Rows dx =
        op.kind == OpKind::BW ? layers.backward(mb, input, keep) : layers.input_grad(mb, input);
    if (stage == 0) {
      // Only the check reads them (m hops on the first stage), and modeled compute skips it.
      if (!sim::modeled()) input_grads_[mb] = std::move(dx);
    } else {
      send(op, *to, std::move(dx));
    }
  } else {
    layers.weight_grad(mb, keep);
  }
  span.end = seconds_now();
  timeline_.push_back(span);
  if (hooks_) hooks_->after(op, index == last_weight_op_[op.chunk]);
  int held = 0;
  std::int64_t bytes = 0;
  for (const auto& c : chunks_)
    held += c->held(), bytes += c->held() * c->bytes_per_microbatch();
  peak_held_ = std::max(peak_held_, held);
  peak_bytes_ = std::max(peak_bytes_, bytes);
}

void PipelineExecutor::run_step() {
  for (int c = static_cast<int>(chunks_.size()); c < schedule_.spec.chunks; ++c) {
    const int stage = schedule_.stage_of(rank_, c), stages = schedule_.stages();
    chunks_.push_back(make_stage_(stage_first_layer(stage, stages, layers_),
                                  stage_layer_count(stage, stages, layers_)));
  }
  std::vector<Stage*> stages;
  for (auto& c : chunks_)
    c->begin_step(), stages.push_back(c.get());
  if (hooks_) hooks_->begin_step(stages);
  timeline_.clear();
  input_grads_.clear();
  local_.clear();
  loss_grads_.clear();
  posted_.clear();
  loss_ = 0;
  sends_ = peak_held_ = 0;
  peak_bytes_ = 0;
  const int n = static_cast<int>(schedule_.ranks[rank_].size());
  for (int i = 0; i < n; ++i) {
    for (int k = i; k <= i + kLookahead; ++k)
      post_receive(k);
    run_op(i);
    hops_.test_sends();
  }
  hops_.wait_sends();
  for (auto& c : chunks_)
    c->finish_step();
}

}  // namespace suite::pipeline

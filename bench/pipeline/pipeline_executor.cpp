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

// Where a hop between two chunks of one rank waits: (2 from_stage + backward, mb).
std::pair<int, int> local_key(int from_stage, int mb, bool backward) {
  return {2 * from_stage + (backward ? 1 : 0), mb};
}

bool is_backward(OpKind k) {
  return k == OpKind::B || k == OpKind::BW;
}

}  // namespace

int stage_first_layer(int stage, int stages, int layers) {
  return stage * (layers / stages) + std::min(stage, layers % stages);
}

int stage_layer_count(int stage, int stages, int layers) {
  return layers / stages + (stage < layers % stages ? 1 : 0);
}

PipelineExecutor::PipelineExecutor(const Schedule& schedule, StageFactory make_stage, int layers,
                                   Comm& comm, int drop_microbatch, OpHooks* hooks)
    : schedule_(schedule),
      make_stage_(std::move(make_stage)),
      layers_(layers),
      comm_(comm),
      rank_(comm.rank()),
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

int PipelineExecutor::source_stage(const Op& op) const {
  const int stage = schedule_.stage_of(rank_, op.chunk);
  if (op.kind == OpKind::F) return stage == 0 ? -1 : stage - 1;
  if (is_backward(op.kind)) return stage == schedule_.stages() - 1 ? -1 : stage + 1;
  return -1;
}

int PipelineExecutor::tag(int from_stage, int mb, bool backward) const {
  return Comm::kPeerTagBase + 2 * (from_stage * schedule_.spec.microbatches + mb) +
         (backward ? 1 : 0);
}

void PipelineExecutor::post_receive(int index) {
  const auto& ops = schedule_.ranks[rank_];
  if (index >= static_cast<int>(ops.size()) || pending_recv_.count(index)) return;
  const Op& op = ops[index];
  const int from = source_stage(op);
  if (from < 0 || schedule_.rank_of(from) == rank_) return;
  HopBuffer& data = inbox_[index] = HopBuffer::receiving(chunks_[op.chunk]->hop_values());
  pending_recv_[index] =
      comm_.post_receive(data.data(), data.values(), DType::fp64, schedule_.rank_of(from),
                         tag(from, op.microbatch, is_backward(op.kind)));
}

Rows PipelineExecutor::take_input(int index) {
  const Op& op = schedule_.ranks[rank_][index];
  const int from = source_stage(op);
  const bool backward = is_backward(op.kind);
  if (schedule_.rank_of(from) == rank_) {
    const auto key = local_key(from, op.microbatch, backward);
    Rows data = local_.at(key).take();
    local_.erase(key);
    return data;
  }
  post_receive(index);
  std::vector<MPI_Request> wait{pending_recv_.at(index)};
  comm_.wait_messages(wait, schedule_.rank_of(from));
  pending_recv_.erase(index);
  Rows data = inbox_.at(index).take();
  inbox_.erase(index);
  return data;
}

void PipelineExecutor::send(const Op& op, int to_stage, Rows data) {
  const int from = schedule_.stage_of(rank_, op.chunk);
  const bool backward = is_backward(op.kind);
  if (schedule_.rank_of(to_stage) == rank_) {
    local_[local_key(from, op.microbatch, backward)] = HopBuffer::holding(std::move(data));
    return;
  }
  auto msg = std::make_unique<InFlight>();
  msg->data = HopBuffer::holding(std::move(data));
  msg->request = comm_.post_send(msg->data.data(), msg->data.values(), DType::fp64,
                                 schedule_.rank_of(to_stage), tag(from, op.microbatch, backward));
  outbox_.push_back(std::move(msg));
  ++sends_;
}

void PipelineExecutor::release_sent() {
  // Under modeled compute the large hops are placeholders and the sends complete in simulated
  // time untested; testing them would slow the simulator (Comm's progress() says why).
  if (sim::modeled()) return;
  std::vector<MPI_Request> requests;  // testing them lets the sends in flight move
  for (auto& m : outbox_)
    requests.push_back(m->request);
  if (requests.empty()) return;
  comm_.test_messages(requests);
  std::vector<std::unique_ptr<InFlight>> pending;
  for (std::size_t k = 0; k < requests.size(); ++k)
    if (requests[k] != MPI_REQUEST_NULL) {
      outbox_[k]->request = requests[k];
      pending.push_back(std::move(outbox_[k]));
    }
  outbox_ = std::move(pending);
}

void PipelineExecutor::run_op(int index) {
  const Op& op = schedule_.ranks[rank_][index];
  const int stage = schedule_.stage_of(rank_, op.chunk), last = schedule_.stages() - 1;
  const int mb = op.microbatch;
  Stage& layers = *chunks_[op.chunk];
  const bool keep = !(stage == 0 && mb == drop_);
  Rows input;
  if (op.kind == OpKind::F) {
    input = stage == 0 ? layers.input(mb) : take_input(index);
  } else if (is_backward(op.kind)) {
    if (stage == last) {
      input = local_.at(local_key(last, mb, false)).take();
      local_.erase(local_key(last, mb, false));
    } else {
      input = take_input(index);
    }
  }
  if (hooks_) hooks_->before(op, index == first_forward_[op.chunk]);
  OpSpan span{op, seconds_now(), 0};
  if (op.kind == OpKind::F) {
    Rows y = layers.forward(mb, input);
    if (stage == last) {  // loss 0.5 |y|^2: its gradient is y, kept for this stage's backward
      for (double v : y)
        loss_ += 0.5 * v * v;
      local_[local_key(last, mb, false)] = HopBuffer::holding(std::move(y));
    } else {
      send(op, stage + 1, std::move(y));
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
      send(op, stage - 1, std::move(dx));
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
  loss_ = 0;
  sends_ = peak_held_ = 0;
  peak_bytes_ = 0;
  const int n = static_cast<int>(schedule_.ranks[rank_].size());
  for (int i = 0; i < n; ++i) {
    for (int k = i; k <= i + kLookahead; ++k)
      post_receive(k);
    run_op(i);
    release_sent();
  }
  std::vector<MPI_Request> sends;
  for (auto& m : outbox_)
    sends.push_back(m->request);
  comm_.wait_messages(sends, -1);
  outbox_.clear();
  for (auto& c : chunks_)
    c->finish_step();
}

}  // namespace suite::pipeline

#include "bench/pipeline/dp_sums.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace suite::pipeline {

namespace {

using model::DpShard;

// The tensors' values (or gradients) one after another, zero-padded to `size`.
Rows pack(const std::vector<ParamTensor>& tensors, bool grads, std::size_t size) {
  Rows flat(size, 0.0);
  std::size_t at = 0;
  for (const ParamTensor& t : tensors) {
    const double* from = grads ? t.grad : t.value;
    std::copy(from, from + t.elems, flat.begin() + static_cast<std::ptrdiff_t>(at));
    at += t.elems;
  }
  return flat;
}

void unpack(const Rows& flat, const std::vector<ParamTensor>& tensors, bool grads) {
  std::size_t at = 0;
  for (const ParamTensor& t : tensors) {
    std::copy(flat.begin() + static_cast<std::ptrdiff_t>(at),
              flat.begin() + static_cast<std::ptrdiff_t>(at + t.elems), grads ? t.grad : t.value);
    at += t.elems;
  }
}

std::int64_t elems(const std::vector<ParamTensor>& tensors) {
  std::int64_t n = 0;
  for (const ParamTensor& t : tensors)
    n += static_cast<std::int64_t>(t.elems);
  return n;
}

// Seconds spent in f, added to into.
template <class F>
void timed(double& into, F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  into += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

bool DataParallelSums::sharded() const {
  return mode_ == DpShard::grads || mode_ == DpShard::full;
}

std::int64_t DataParallelSums::params() const {
  std::int64_t n = 0;
  for (const Chunk& c : chunks_)
    n += elems(c.tensors);
  return n;
}

// A chunk's layers are alike (the same shapes), so its largest is its share.
std::int64_t DataParallelSums::layer_params() const {
  std::int64_t most = 0;
  for (const Chunk& c : chunks_)
    most = std::max(most, elems(c.tensors) / std::max(c.stage->count(), 1));
  return most;
}

Rows DataParallelSums::slice(const Chunk& c, const Rows& whole) const {
  const auto from = whole.begin() + static_cast<std::ptrdiff_t>(c.shard * dp_.rank());
  return Rows(from, from + static_cast<std::ptrdiff_t>(c.shard));
}

Rows DataParallelSums::shard_of(int c, const std::vector<ParamTensor>& tensors, bool grads) const {
  const Chunk& chunk = chunks_[c];
  return slice(chunk, pack(tensors, grads, chunk.initial.size()));
}

void DataParallelSums::begin_step(const std::vector<Stage*>& chunks) {
  const auto n = static_cast<std::size_t>(dp_.size());
  if (chunks_.empty())
    for (Stage* s : chunks) {
      Chunk c;
      c.stage = s;
      c.tensors = s->params();
      c.shard = (static_cast<std::size_t>(elems(c.tensors)) + n - 1) / n;
      c.initial = pack(c.tensors, false, c.shard * n);
      chunks_.push_back(std::move(c));
    }
  sent_ = {};
  sum_s_ = gather_s_ = 0;
  for (Chunk& c : chunks_) {
    c.param_shard = slice(c, c.initial);
    if (sharded())
      release(c);
    else
      unpack(c.initial, c.tensors, false);
  }
}

void DataParallelSums::before(const Op& op, bool first_forward) {
  const bool gathers =
      mode_ == DpShard::full ? op.kind != OpKind::W : mode_ == DpShard::grads && first_forward;
  if (gathers) timed(gather_s_, [&] { gather(chunks_[op.chunk]); });
}

void DataParallelSums::after(const Op& op, bool last_weight_op) {
  Chunk& c = chunks_[op.chunk];
  if (mode_ == DpShard::full && op.kind != OpKind::W) release(c);
  if (last_weight_op) timed(sum_s_, [&] { sum(c); });
}

void DataParallelSums::gather(Chunk& c) {
  Rows whole(c.shard * dp_.size());
  const std::int64_t before = dp_.bytes().sent;
  dp_.all_gather(c.param_shard.data(), whole.data(), c.shard, DType::fp64);
  sent_.all_gather += static_cast<double>(dp_.bytes().sent - before);
  unpack(whole, c.tensors, false);
}

void DataParallelSums::release(Chunk& c) {
  for (const ParamTensor& t : c.tensors)
    std::fill(t.value, t.value + t.elems, std::numeric_limits<double>::quiet_NaN());
}

void DataParallelSums::sum(Chunk& c) {
  c.stage->finish_step();  // the chunk's gradients complete (summed over its CP group) first
  const Rows grads = pack(c.tensors, true, c.initial.size());
  const std::int64_t before = dp_.bytes().sent;
  if (mode_ == DpShard::none) {
    Rows summed(grads.size());
    dp_.all_reduce(grads.data(), summed.data(), grads.size(), DType::fp64);
    sent_.all_reduce += static_cast<double>(dp_.bytes().sent - before);
    unpack(summed, c.tensors, true);
    for (const ParamTensor& t : c.tensors)
      for (std::size_t i = 0; i < t.elems; ++i)
        t.value[i] -= kLearningRate * t.grad[i];
    c.grad_shard = slice(c, summed);
    c.param_shard = slice(c, pack(c.tensors, false, grads.size()));
    return;
  }
  c.grad_shard.assign(c.shard, 0.0);
  dp_.reduce_scatter(grads.data(), c.grad_shard.data(), c.shard, DType::fp64);
  sent_.reduce_scatter += static_cast<double>(dp_.bytes().sent - before);
  for (std::size_t i = 0; i < c.shard; ++i)
    c.param_shard[i] -= kLearningRate * c.grad_shard[i];
  if (mode_ == DpShard::optimizer)
    gather(c);
  else
    release(c);  // kept sharded until the next step's first forward
}

}  // namespace suite::pipeline

#include "bench/moe/moe_microbatch.hpp"

#include <algorithm>

#include <mpi.h>

#include "common/harness/errors.hpp"
#include "common/transport/rank_gather.hpp"

namespace suite::moe {
namespace {

std::string key(const char* name, int i) {
  return std::string(name) + "#" + std::to_string(i);
}

// One figure of every micro-batch's layer, summed.
template <class Get>
StepBytes summed(const std::vector<std::unique_ptr<MoeLayer>>& mbs, Get get) {
  StepBytes sum;
  for (const auto& l : mbs) {
    const StepBytes part = get(*l);
    sum.control += part.control;
    sum.dispatch += part.dispatch;
    sum.combine += part.combine;
  }
  return sum;
}

bool is_exchange(const std::string& piece_key) {
  const std::string piece = piece_key.substr(0, piece_key.find('#'));
  return piece == "dispatch" || piece == "combine" || piece == "bwd_combine" ||
         piece == "bwd_dispatch";
}

}  // namespace

const char* work_name(Work w) {
  switch (w) {
    case Work::route:
      return "route";
    case Work::permute:
      return "permute";
    case Work::expert:
      return "expert";
    case Work::bwd_expert:
      return "bwd_expert";
    case Work::bwd_router:
      return "bwd_router";
  }
  return "";
}

const char* exchange_name(Exchange x) {
  switch (x) {
    case Exchange::dispatch:
      return "dispatch";
    case Exchange::combine:
      return "combine";
    case Exchange::bwd_combine:
      return "bwd_combine";
    case Exchange::bwd_dispatch:
      return "bwd_dispatch";
  }
  return "";
}

// Micro-batch i+1's rows leave while i's experts compute and i-1's come back. i+1 starts once
// i has arrived: started together, the two would share the links and i arrive later.
void forward_program(int m, const PipelineHooks& h) {
  for (int i = 0; i < m; ++i)
    h.compute(i, Work::route);
  h.compute(0, Work::permute);
  h.start(0, Exchange::dispatch);
  for (int i = 0; i < m; ++i) {
    h.finish(i, Exchange::dispatch);
    if (i + 1 < m) {
      h.compute(i + 1, Work::permute);
      h.start(i + 1, Exchange::dispatch);
    }
    h.compute(i, Work::expert);
    h.start(i, Exchange::combine);
    if (i > 0) h.finish(i - 1, Exchange::combine);
  }
  h.finish(m - 1, Exchange::combine);
}

// The same with the backward's exchanges: output gradients to the experts, input gradients home.
void backward_program(int m, const PipelineHooks& h) {
  h.start(0, Exchange::bwd_combine);
  for (int i = 0; i < m; ++i) {
    h.finish(i, Exchange::bwd_combine);
    if (i + 1 < m) h.start(i + 1, Exchange::bwd_combine);
    h.compute(i, Work::bwd_expert);
    h.start(i, Exchange::bwd_dispatch);
    if (i > 0) h.finish(i - 1, Exchange::bwd_dispatch);
  }
  h.finish(m - 1, Exchange::bwd_dispatch);
  for (int i = 0; i < m; ++i)
    h.compute(i, Work::bwd_router);
}

double schedule_critical_path(const std::vector<SchedulePiece>& pieces, bool overlapped) {
  double host = 0, network = 0;
  std::map<std::string, double> done;
  for (const SchedulePiece& p : pieces)
    switch (p.kind) {
      case SchedulePiece::Kind::compute:
        host += p.seconds;
        break;
      case SchedulePiece::Kind::start:
        network = std::max(network, host) + p.seconds;
        done[p.key] = network;
        if (!overlapped) host = network;
        break;
      case SchedulePiece::Kind::finish:
        host = std::max(host, done[p.key]);
        break;
    }
  return host;
}

double critical_path(int m, bool backward, const std::map<std::string, double>& seconds,
                     bool overlapped) {
  std::vector<SchedulePiece> pieces;
  auto at = [&](const std::string& k) {
    auto it = seconds.find(k);
    return it == seconds.end() ? 0.0 : it->second;
  };
  using Kind = SchedulePiece::Kind;
  PipelineHooks program{[&](int i, Work w) {
                          const std::string k = key(work_name(w), i);
                          pieces.push_back({Kind::compute, k, at(k)});
                        },
                        [&](int i, Exchange x) {
                          const std::string k = key(exchange_name(x), i);
                          pieces.push_back({Kind::start, k, at(k)});
                        },
                        [&](int i, Exchange x) {
                          pieces.push_back({Kind::finish, key(exchange_name(x), i), 0});
                        }};
  backward ? backward_program(m, program) : forward_program(m, program);
  return schedule_critical_path(pieces, overlapped);
}

MicrobatchPipeline::MicrobatchPipeline(MoeLayer& owner, Device& device, Comm& group, MoeOps& ops,
                                       std::int64_t first_token, NodeComms comms)
    : owner_(owner) {
  MoeConfig cfg = owner.cfg_;
  const int m = cfg.microbatches;
  SUITE_CHECK(m >= 1 && cfg.tokens % m == 0, "micro-batches that divide the rank's tokens");
  cfg.tokens /= m;
  cfg.microbatches = 1;
  for (int i = 0; i < m; ++i)
    mbs_.push_back(std::make_unique<MoeLayer>(cfg, device, group, ops, first_token + i * cfg.tokens,
                                              comms, MicrobatchOf{&owner, i * cfg.tokens}));
}

bool MicrobatchPipeline::overlapped() const {
  return owner_.comm_.nonblocking_all_to_all_v();
}

std::string MicrobatchPipeline::overlap_mechanism() const {
  return owner_.comm_.all_to_all_v_overlap();
}

void MicrobatchPipeline::set_select_bias(const std::vector<float>& bias) {
  for (auto& l : mbs_)
    l->set_select_bias(bias);
}

void MicrobatchPipeline::follow_placement() {
  for (std::size_t i = 0; i < mbs_.size(); ++i)
    mbs_[i]->set_placement(owner_.placement_, i + 1 == mbs_.size() ? owner_.replica_sync_
                                                                   : std::vector<ReplicaSync>{});
}

std::vector<double> MicrobatchPipeline::routed_by(int count) const {
  std::vector<double> sum(static_cast<std::size_t>(owner_.cfg_.experts), 0.0);
  for (int j = 0; j < count; ++j) {
    const auto r = mbs_[static_cast<std::size_t>(j)]->routed_per_expert();
    for (std::size_t e = 0; e < r.size(); ++e)
      sum[e] += r[e];
  }
  return sum;
}

void MicrobatchPipeline::compute(int i, Work w) {
  MoeLayer& l = *mbs_[static_cast<std::size_t>(i)];
  switch (w) {
    case Work::route:
      l.fwd_calls_ = {};
      // The replica split rule counts the rank's copies across its micro-batches, as M = 1's.
      {
        const std::vector<double> before = routed_by(i);
        l.copies_before_.assign(before.begin(), before.end());
      }
      return l.route();
    case Work::permute:
      return l.permute_in();
    case Work::expert:
      l.regroup();
      return l.experts();
    case Work::bwd_expert:
      l.regroup_backward();
      l.experts_backward();
      if (!l.replica_sync_.empty()) l.sync_replicas();  // the last: every gradient is in
      return;
    case Work::bwd_router:
      if (i == 0) {  // the aux loss over the whole rank's routing, as M = 1 has it
        const std::vector<double> routed = routed_by(microbatches());
        prob_grad_ = l.cfg_.aux_alpha != 0 ? l.aux_loss_prob_grad(routed, owner_.cfg_.tokens)
                                           : std::vector<float>(routed.size(), 0.0f);
      }
      return l.router_backward(prob_grad_);
  }
}

PipelineHooks MicrobatchPipeline::hooks(PhaseTimer& phases, bool eager) {
  auto exchange = [this](int i, Exchange x, bool start) {
    MoeLayer& l = *mbs_[static_cast<std::size_t>(i)];
    switch (x) {
      case Exchange::dispatch:
        return start ? l.dispatch_start() : l.dispatch_finish();
      case Exchange::combine:
        return start ? l.combine_start() : l.combine_finish();
      case Exchange::bwd_combine:
        return start ? l.combine_backward_start() : l.combine_backward_finish();
      case Exchange::bwd_dispatch:
        return start ? l.dispatch_backward_start() : l.dispatch_backward_finish();
    }
  };
  // Eager: each piece under its own name, an exchange timed from its start to its end.
  auto name = [eager](const char* n, int i, const char* suffix) {
    return eager ? key(n, i) : std::string(n) + suffix;
  };
  return {[this, &phases, name](int i, Work w) {
            phases.time(name(work_name(w), i, ""), [&] { compute(i, w); });
          },
          [&phases, exchange, name, eager](int i, Exchange x) {
            phases.time(name(exchange_name(x), i, ""), [&] {
              exchange(i, x, true);
              if (eager) exchange(i, x, false);
            });
          },
          [&phases, exchange, name, eager](int i, Exchange x) {
            if (!eager)
              phases.time(name(exchange_name(x), i, "_wait"), [&] { exchange(i, x, false); });
          }};
}

void MicrobatchPipeline::begin_pass(bool backward) {
  if (backward)
    for (auto& l : mbs_) {
      l->measured_bwd_ = {};
      l->bwd_calls_ = {};
      l->bwd_flops_ = 0;
    }
}

void MicrobatchPipeline::run(bool backward, PhaseTimer& phases) {
  begin_pass(backward);
  const PipelineHooks h = hooks(phases, false);
  backward ? backward_program(microbatches(), h) : forward_program(microbatches(), h);
}

void MicrobatchPipeline::forward(PhaseTimer& phases) {
  run(false, phases);
}

void MicrobatchPipeline::backward(PhaseTimer& phases) {
  run(true, phases);
}

PipelineProfile MicrobatchPipeline::profile() {
  PhaseTimer timer(owner_.device_);
  timer.begin_step();
  const bool bwd = owner_.cfg_.backward();
  const PipelineHooks h = hooks(timer, true);
  forward_program(microbatches(), h);
  if (bwd) backward_program(microbatches(), h);
  timer.end_step(true);
  // Every exchange holds the group together, so the group runs each piece as its slowest rank
  // computes it and as its last rank to arrive exchanges it (the others' waits are not the
  // network's): compute pieces take the group's max, exchanges its min.
  std::map<std::string, double> seconds;
  for (const auto& [name, values] : timer.series())
    seconds[name] = values.back();
  std::vector<double> v;
  std::vector<bool> exchange;
  for (const auto& [name, s] : seconds)
    v.push_back(s), exchange.push_back(is_exchange(name));
  extreme_over_ranks(v, exchange, owner_.comm_.mpi_comm());
  PipelineProfile p;
  std::size_t i = 0;
  for (auto& [name, s] : seconds) {
    s = v[i];
    (exchange[i++] ? p.a2a_s : p.compute_s) += s;
  }
  p.pred_step_s = critical_path(microbatches(), false, seconds, overlapped()) +
                  (bwd ? critical_path(microbatches(), true, seconds, overlapped()) : 0.0);
  return p;
}

StepBytes MicrobatchPipeline::measured_bytes() const {
  return summed(mbs_, [](const MoeLayer& l) { return l.measured_bytes(); });
}

StepBytes MicrobatchPipeline::implied_bytes() const {
  return summed(mbs_, [](const MoeLayer& l) { return l.implied_bytes(); });
}

StepBytes MicrobatchPipeline::measured_bwd_bytes() const {
  return summed(mbs_, [](const MoeLayer& l) { return l.measured_bwd_bytes(); });
}

StepBytes MicrobatchPipeline::implied_bwd_bytes() const {
  StepBytes sum = summed(mbs_, [](const MoeLayer& l) { return l.implied_bwd_bytes(); });
  // The aux loss's all-gather is made once for the rank, by the first micro-batch.
  if (owner_.cfg_.aux_alpha != 0)
    sum.control -= static_cast<std::int64_t>(microbatches() - 1) * (owner_.ranks_ - 1) *
                   owner_.cfg_.experts * 8;
  return sum;
}

std::string MicrobatchPipeline::level_mismatch() const {
  std::string why;
  for (const auto& l : mbs_)
    why += l->level_mismatch();
  return why;
}

std::vector<std::int64_t> MicrobatchPipeline::drops() const {
  std::vector<std::int64_t> out;
  for (const auto& l : mbs_)
    out.push_back(static_cast<std::int64_t>(std::count(l->keep().begin(), l->keep().end(), 0)));
  return out;
}

std::vector<std::int32_t> MicrobatchPipeline::chosen() const {
  std::vector<std::int32_t> out;
  for (const auto& l : mbs_)
    out.insert(out.end(), l->chosen().begin(), l->chosen().end());
  return out;
}

std::vector<std::uint8_t> MicrobatchPipeline::keep() const {
  std::vector<std::uint8_t> out;
  for (const auto& l : mbs_)
    out.insert(out.end(), l->keep().begin(), l->keep().end());
  return out;
}

std::vector<float> MicrobatchPipeline::gate_grad() const {
  std::vector<float> out;
  for (const auto& l : mbs_) {
    const auto g = l->gate_grad();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

}  // namespace suite::moe

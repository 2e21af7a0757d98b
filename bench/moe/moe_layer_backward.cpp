// MoeLayer's backward (moe_layer.hpp describes its phases), on the buffers of the forward it
// follows: the routing, the dispatch and regroup plans, the expert inputs X, hidden H and
// activations A, and the expert outputs y that came back in the combine.
#include <algorithm>

#include "bench/moe/moe_buffers.hpp"
#include "bench/moe/moe_layer.hpp"
#include "common/harness/errors.hpp"

namespace suite::moe {

void MoeLayer::backward(PhaseTimer& phases) {
  SUITE_CHECK(cfg_.backward(), "backward() of a layer built for the forward pass only");
  measured_bwd_ = {};
  bwd_calls_ = {};
  bwd_flops_ = 0;
  phases.time("bwd_combine", [&] {
    combine_backward_start();
    combine_backward_finish();
  });
  phases.time("bwd_permute", [&] { regroup_backward(); });
  phases.time("bwd_expert", [&] { experts_backward(); });
  if (!replica_sync_.empty()) phases.time("bwd_replicas", [&] { sync_replicas(); });
  phases.time("bwd_dispatch", [&] {
    dispatch_backward_start();
    dispatch_backward_finish();
  });
  phases.time("bwd_router", [&] {
    router_backward(cfg_.aux_alpha != 0 ? aux_loss_prob_grad(routed_per_expert(), cfg_.tokens)
                                        : std::vector<float>(cfg_.experts, 0.0f));
  });
}

// Gate gradients and the gate-weighted output gradient of each kept copy, in the send order
// of the dispatch, then to the experts' ranks along the dispatch's route.
void MoeLayer::combine_backward_start() {
  const std::int64_t h = cfg_.h;
  if (hier_) {
    ensure(grad_recv_, static_cast<std::size_t>(recv_rows_ * h) * e_);
    levels_[2] = {};
    hier_->combine_backward_start(dy_.data(), levels_[2]);
    bwd_calls_.all_to_all_v += 3;
    return;
  }
  const std::size_t sent_rows = plan_.send_src.size();
  ensure(grad_send_, sent_rows * static_cast<std::size_t>(h) * e_);
  ops_.combine_backward(cfg_.tokens, cfg_.k, h, slot_pos_.as<std::int64_t>(),
                        gates_dev_.as<float>(), dy_.data(), back_recv_.data(), grad_send_.data(),
                        gate_grad_dev_.as<float>());
  ensure(grad_recv_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  measured_bwd_.combine = all_to_all_v_bytes(grad_send_.data(), send_elems_, send_displs_,
                                             grad_recv_.data(), recv_elems_, recv_displs_);
  ++bwd_calls_.all_to_all_v;
}

void MoeLayer::combine_backward_finish() {
  if (hier_) {
    hier_->combine_backward_finish(grad_recv_.data(), gate_grad_dev_.as<float>(), levels_[2]);
    measured_bwd_.combine = levels_[2].sent();
    return;
  }
  comm_.finish_all_to_all_v(ticket_);
  ticket_ = -1;
}

// Received output gradients into [local expert][source rank] order, as the forward's inputs.
void MoeLayer::regroup_backward() {
  ensure(d_expert_out_, static_cast<std::size_t>(recv_rows_ * cfg_.h) * e_);
  ops_.gather_rows(recv_rows_, cfg_.h, regroup_gather_.as<std::int64_t>(), grad_recv_.data(),
                   d_expert_out_.data());
}

void MoeLayer::experts_backward() {
  const std::int64_t h = cfg_.h, d_ff = cfg_.d_ff, w1c = cfg_.w1_cols();
  ensure(d_act_, static_cast<std::size_t>(recv_rows_ * d_ff) * e_);
  ensure(d_hidden_, static_cast<std::size_t>(recv_rows_ * w1c) * e_);
  ensure(d_expert_in_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  // A later micro-batch adds its weight gradients to those already there.
  const bool add = of_.row0 > 0;
  auto gemm = [&](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                  const void* b, void* c, bool accumulate = false) {
    ops_.gemm_ex(ta, tb, m, n, k, a, b, accumulate ? 1.0 : 0.0, c);
    bwd_flops_ += 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  };
  // Per local expert over all of its rows (never per token): dA = dY W2^T, dW2 = A^T dY.
  std::int64_t offset = 0;
  for (std::size_t j = 0; j < w2_.size(); ++j) {
    const std::int64_t n = regroup_.expert_rows[j];
    if (n > 0) {
      gemm(false, true, n, d_ff, h, row(d_expert_out_, offset, h), w2_[j].data(),
           row(d_act_, offset, d_ff));
      gemm(true, false, d_ff, h, n, row(act_, offset, d_ff), row(d_expert_out_, offset, h),
           dw2_[j].data(), add);
    } else if (!add) {
      ops_.zero(dw2_[j].data(), dw2_[j].bytes());
    }
    offset += n;
  }
  if (cfg_.mlp == Mlp::swiglu)
    ops_.silu_mul_backward(recv_rows_, d_ff, hidden_.data(), d_act_.data(), d_hidden_.data());
  else
    ops_.gelu_backward(recv_rows_ * d_ff, hidden_.data(), d_act_.data(), d_hidden_.data());
  // dW1 = X^T dH, dX = dH W1^T.
  offset = 0;
  for (std::size_t j = 0; j < w1_.size(); ++j) {
    const std::int64_t n = regroup_.expert_rows[j];
    if (n > 0) {
      gemm(true, false, h, w1c, n, row(expert_in_, offset, h), row(d_hidden_, offset, w1c),
           dw1_[j].data(), add);
      gemm(false, true, n, h, w1c, row(d_hidden_, offset, w1c), w1_[j].data(),
           row(d_expert_in_, offset, h));
    } else {
      if (!add) ops_.zero(dw1_[j].data(), dw1_[j].bytes());
    }
    offset += n;
  }
}

// Redundant experts: each replicated slot's weight gradients are its rows' share; the two
// replicas all-reduce them (sum) in their two-rank group, so both hold the expert's gradient.
// The bytes go with the backward's control bytes.
void MoeLayer::sync_replicas() {
  for (const ReplicaSync& r : replica_sync_)
    for (Buffer* g :
         {&dw1_[static_cast<std::size_t>(r.slot)], &dw2_[static_cast<std::size_t>(r.slot)]}) {
      ensure(replica_tmp_, g->bytes());
      const std::int64_t before = r.comm->bytes().sent;
      r.comm->all_reduce(g->data(), replica_tmp_.data(), g->bytes() / e_, cfg_.dtype);
      measured_bwd_.control += r.comm->bytes().sent - before;
      device_.copy_on_device(g->data(), replica_tmp_.data(), g->bytes());
    }
}

// Input gradients back to received order, home along the combine's route, and each token's
// kept copies summed (the dispatch sent one row per kept copy).
void MoeLayer::dispatch_backward_start() {
  const std::int64_t h = cfg_.h;
  ensure(d_back_send_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  ops_.gather_rows(recv_rows_, h, regroup_scatter_.as<std::int64_t>(), d_expert_in_.data(),
                   d_back_send_.data());
  if (hier_) {
    levels_[3] = {};
    hier_->dispatch_backward_start(d_back_send_.data(), levels_[3]);
    measured_bwd_.dispatch = levels_[3].sent();
    bwd_calls_.all_to_all_v += 2;
    return;
  }
  const std::size_t sent_rows = plan_.send_src.size();
  ensure(d_back_recv_, sent_rows * static_cast<std::size_t>(h) * e_);
  measured_bwd_.dispatch = all_to_all_v_bytes(d_back_send_.data(), recv_elems_, recv_displs_,
                                              d_back_recv_.data(), send_elems_, send_displs_);
  ++bwd_calls_.all_to_all_v;
}

void MoeLayer::dispatch_backward_finish() {
  if (hier_) return hier_->dispatch_backward_finish(dx_.data(), levels_[3]);
  comm_.finish_all_to_all_v(ticket_);
  ticket_ = -1;
  ops_.combine(cfg_.tokens, cfg_.k, cfg_.h, slot_pos_.as<std::int64_t>(), nullptr,
               d_back_recv_.data(), dx_.data());
}

// The router's gradient: the gates' (renormalised over the k chosen, drops included in the
// sum) and the aux loss's alpha E f_i / N on every probability (f_i = the group's routed
// fraction, held constant; P_i = mean probability over the group's N = T N_e tokens), through
// the softmax; then dW_router = x^T dz and dx += dz W_router^T. Local but for f_i: the group's
// routed counts, one all-gather of E values per rank.
void MoeLayer::router_backward(const std::vector<float>& prob_grad) {
  const std::int64_t T = cfg_.tokens, E = cfg_.experts, h = cfg_.h;
  upload(prob_grad_dev_, prob_grad.data(), bytes_of(prob_grad));
  ops_.router_backward(T, cfg_.experts, cfg_.k, logits_.data(), logit_bias_.as<float>(),
                       chosen_dev_.as<std::int32_t>(), gate_grad_dev_.as<float>(),
                       prob_grad_dev_.as<float>(), dlogits_.data());
  ops_.gemm_ex(true, false, h, E, T, x_.data(), dlogits_.data(), of_.row0 > 0 ? 1.0 : 0.0,
               dw_router_.data());
  ops_.gemm_ex(false, true, T, h, E, dlogits_.data(), w_router_.data(), 1.0, dx_.data());
}

// The aux loss's gradient on every probability, alpha E f_i / N, with f_i the group's routed
// fraction: one all-gather of the routed counts.
std::vector<double> MoeLayer::routed_per_expert() const {
  std::vector<double> routed(static_cast<std::size_t>(cfg_.experts), 0.0);
  for (auto e : chosen_)
    routed[static_cast<std::size_t>(e)] += 1;
  return routed;
}

std::vector<float> MoeLayer::aux_loss_prob_grad(const std::vector<double>& routed_here,
                                                std::int64_t T) {
  const std::int64_t E = cfg_.experts;
  std::vector<double> routed = routed_here;
  upload(routed_send_, routed.data(), bytes_of(routed));
  const std::int64_t before = comm_.bytes().sent;
  // An all-gather (each rank's E counts to every other rank, summed here) rather than an
  // all-reduce: its payload is exact, where an all-reduce's depends on the algorithm.
  comm_.all_gather(routed_send_.data(), routed_recv_.data(), routed.size(), DType::fp64);
  measured_bwd_.control += comm_.bytes().sent - before;
  ++bwd_calls_.all_gather;
  std::vector<double> all(routed.size() * static_cast<std::size_t>(ranks_));
  device_.copy_to_host(all.data(), routed_recv_.data(), bytes_of(all));
  for (std::size_t i = 0; i < routed.size(); ++i) {
    routed[i] = 0;
    for (int r = 0; r < ranks_; ++r)
      routed[i] += all[static_cast<std::size_t>(r) * routed.size() + i];
  }
  const double tokens = static_cast<double>(T) * ranks_, copies = tokens * cfg_.k;
  std::vector<float> prob_grad(routed.size());
  for (std::size_t i = 0; i < routed.size(); ++i)
    prob_grad[i] =
        static_cast<float>(cfg_.aux_alpha * static_cast<double>(E) * (routed[i] / copies) / tokens);
  return prob_grad;
}

StepBytes MoeLayer::implied_bwd_bytes() const {
  const StepBytes fwd = implied_bytes();
  StepBytes b;
  if (cfg_.aux_alpha != 0)  // the routed counts' all-gather: E counts to each other rank
    b.control = static_cast<std::int64_t>(ranks_ - 1) * cfg_.experts * 8;
  for (const ReplicaSync& r : replica_sync_)  // two ranks: an all-reduce sends its whole buffer
    b.control += static_cast<std::int64_t>(dw1_[static_cast<std::size_t>(r.slot)].bytes() +
                                           dw2_[static_cast<std::size_t>(r.slot)].bytes());
  b.combine = fwd.dispatch;  // each kept copy's gradient row to its expert's rank
  b.dispatch = fwd.combine;  // each received row's input gradient back to its source
  if (hier_) b.combine += hier_->inter_records_answered() * 4;  // gate gradients, fp32
  return b;
}

std::vector<double> MoeLayer::expert_w1(int j) const {
  return to_host(w1_.at(static_cast<std::size_t>(j)), cfg_.h * cfg_.w1_cols());
}

std::vector<double> MoeLayer::expert_w2(int j) const {
  return to_host(w2_.at(static_cast<std::size_t>(j)), cfg_.d_ff * cfg_.h);
}

std::vector<double> MoeLayer::expert_w1_grad(int j) const {
  return to_host(dw1_.at(static_cast<std::size_t>(j)), cfg_.h * cfg_.w1_cols());
}

std::vector<double> MoeLayer::expert_w2_grad(int j) const {
  return to_host(dw2_.at(static_cast<std::size_t>(j)), cfg_.d_ff * cfg_.h);
}

std::vector<float> MoeLayer::gate_grad() const {
  std::vector<float> g(static_cast<std::size_t>(cfg_.tokens * cfg_.k));
  device_.copy_to_host(g.data(), gate_grad_dev_.data(), bytes_of(g));
  return g;
}

}  // namespace suite::moe

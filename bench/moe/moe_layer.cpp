#include "bench/moe/moe_layer.hpp"

#include <algorithm>
#include <optional>

#include "bench/moe/moe_buffers.hpp"
#include "common/device/typed_host.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::moe {
namespace {

namespace km = kernels::moe;

}  // namespace

void MoeLayer::ensure(Buffer& b, std::size_t bytes) {
  grow(device_, b, bytes);
}

MoeLayer::MoeLayer(const MoeConfig& cfg, Device& device, Comm& group, MoeOps& ops,
                   std::int64_t first_token, NodeComms comms, MicrobatchOf of)
    : cfg_(cfg),
      of_(of),
      device_(device),
      comm_(group),
      ops_(ops),
      rank_(group.rank()),
      ranks_(group.size()),
      e_(dtype_size(cfg.dtype)),
      first_token_(first_token) {
  SUITE_CHECK(ranks_ == cfg.n_e, "the group's size must be the case's N_e");
  if (cfg.dispatch == Dispatch::hierarchical) {
    SUITE_CHECK(comms.node && comms.rail && comms.node->size() == cfg.ranks_per_node &&
                    comms.rail->size() == cfg.nodes() &&
                    rank_ == comms.rail->rank() * cfg.ranks_per_node + comms.node->rank(),
                "hierarchical dispatch needs the node and rail groups of this rank");
    hier_ = std::make_unique<HierarchicalExchange>(device, ops, *comms.node, *comms.rail, cfg.dtype,
                                                   cfg.h);
    hier_->set_rail_nonblocking(of.owner != nullptr);  // a micro-batch overlaps its rail level
  }
  const std::int64_t T = cfg.tokens, h = cfg.h, E = cfg.experts;
  capacity_ = km::expert_capacity(cfg.capacity_factor, cfg.k, T * cfg.n_e, cfg.experts);
  // Modeled compute reads no tensor values: its tensors are allocated (placeholders from 1 MiB
  // on) and zeroed where real, never drawn.
  const bool modeled = sim::modeled();
  auto init = [&](Buffer& b, Tensor t, std::int64_t index, std::int64_t r0, std::int64_t rows,
                  std::int64_t cols) {
    if (modeled)
      device_.fill_zero(b.data(), b.bytes());  // skipped for placeholders
    else
      upload_values(b, init_block(cfg, t, index, r0, rows, cols));
  };
  // A micro-batch's rows and weights are views of its owner's (the owner made them); per
  // token: rows of tokens (its own from of.row0), else a weight's; t: the values drawn.
  MoeLayer* owner = of.owner;
  auto make = [&](Buffer MoeLayer::*b, std::int64_t rows, std::int64_t cols, bool per_token,
                  std::optional<Tensor> t) {
    if (owner) {
      this->*b = view_of(owner->*b, per_token ? of.row0 : 0, rows, cols);
      return;
    }
    this->*b = device.alloc(static_cast<std::size_t>(rows * cols) * e_);
    if (t) init(this->*b, *t, 0, per_token ? first_token : 0, rows, cols);
  };
  make(&MoeLayer::x_, T, h, true, Tensor::input);
  make(&MoeLayer::w_router_, h, E, false, Tensor::router);
  placement_ = block_placement(cfg.experts, ranks_);
  slots_ = placement_.slots_per_rank;
  init_experts();
  logits_ = device.alloc(static_cast<std::size_t>(T * E) * e_);
  make(&MoeLayer::out_, T, h, true, std::nullopt);
  {
    // The biases and the counts the host reads back: real in modeled mode too.
    sim::KeepData keep;
    logit_bias_host_ = skew_logit_bias(cfg);
    logit_bias_ = device.alloc(bytes_of(logit_bias_host_));
    upload(logit_bias_, logit_bias_host_.data(), bytes_of(logit_bias_host_));
    set_select_bias(std::vector<float>(static_cast<std::size_t>(E), 0.0f));
    // One count per slot: E, or E + R under redundant experts.
    counts_send_ =
        device.alloc(static_cast<std::size_t>(E + cfg.redundant_experts) * sizeof(double));
    counts_recv_ =
        device.alloc(static_cast<std::size_t>(E + cfg.redundant_experts) * sizeof(double));
    if (cfg.backward()) {
      routed_send_ = device.alloc(static_cast<std::size_t>(E) * sizeof(double));
      routed_recv_ = device.alloc(static_cast<std::size_t>(E * ranks_) * sizeof(double));
    }
  }
  // The routing's device copies: modeled compute routes on the host (route_drawn) and leaves
  // these to the skipped kernels.
  chosen_dev_ = device.alloc(static_cast<std::size_t>(T * cfg.k) * sizeof(std::int32_t));
  gates_dev_ = device.alloc(static_cast<std::size_t>(T * cfg.k) * sizeof(float));
  prob_sum_dev_ = device.alloc(static_cast<std::size_t>(E) * sizeof(float));
  if (cfg.backward()) {
    gate_grad_dev_ = device.alloc(static_cast<std::size_t>(T * cfg.k) * sizeof(float));
    prob_grad_dev_ = device.alloc(static_cast<std::size_t>(E) * sizeof(float));
  }
  chosen_.resize(static_cast<std::size_t>(T * cfg.k));
  gates_.resize(chosen_.size());
  keep_.assign(chosen_.size(), 1);
  prob_sum_.assign(static_cast<std::size_t>(E), 0.0f);
  if (!cfg.backward()) return;
  make(&MoeLayer::dy_, T, h, true, Tensor::grad_output);
  make(&MoeLayer::dx_, T, h, true, std::nullopt);
  make(&MoeLayer::dw_router_, h, E, false, std::nullopt);
  dlogits_ = device.alloc(static_cast<std::size_t>(T * E) * e_);
}

// The weights (and their gradients) of this rank's slots, each the weights of its expert.
void MoeLayer::init_experts() {
  const std::int64_t h = cfg_.h;
  w1_.clear();
  w2_.clear();
  dw1_.clear();
  dw2_.clear();
  if (of_.owner) {  // the owner's weights and gradients (its placement is this one's)
    const MoeLayer& o = *of_.owner;
    for (int j = 0; j < slots_; ++j) {
      const auto i = static_cast<std::size_t>(j);
      w1_.push_back(view_of(o.w1_[i], 0, h, cfg_.w1_cols()));
      w2_.push_back(view_of(o.w2_[i], 0, cfg_.d_ff, h));
      if (!cfg_.backward()) continue;
      dw1_.push_back(view_of(o.dw1_[i], 0, h, cfg_.w1_cols()));
      dw2_.push_back(view_of(o.dw2_[i], 0, cfg_.d_ff, h));
    }
    return;
  }
  for (int j = 0; j < slots_; ++j) {
    const int expert = placement_.slot_expert[static_cast<std::size_t>(rank_ * slots_ + j)];
    w1_.push_back(device_.alloc(static_cast<std::size_t>(h * cfg_.w1_cols()) * e_));
    w2_.push_back(device_.alloc(static_cast<std::size_t>(cfg_.d_ff * h) * e_));
    if (sim::modeled()) {
      device_.fill_zero(w1_.back().data(), w1_.back().bytes());
      device_.fill_zero(w2_.back().data(), w2_.back().bytes());
    } else {
      upload_values(w1_.back(), init_block(cfg_, Tensor::w1, expert, 0, h, cfg_.w1_cols()));
      upload_values(w2_.back(), init_block(cfg_, Tensor::w2, expert, 0, cfg_.d_ff, h));
    }
    if (cfg_.backward()) {
      dw1_.push_back(device_.alloc(w1_.back().bytes()));
      dw2_.push_back(device_.alloc(w2_.back().bytes()));
    }
  }
}

void MoeLayer::set_placement(const ExpertPlacement& p, std::vector<ReplicaSync> sync) {
  SUITE_CHECK(p.experts == cfg_.experts && p.ranks == ranks_, "a placement of this group");
  placement_ = p;
  slots_ = p.slots_per_rank;
  replica_sync_ = std::move(sync);
  init_experts();
}

void MoeLayer::release_step_buffers() {
  for (Buffer* b :
       {&send_, &recv_, &regroup_gather_, &regroup_scatter_, &expert_in_, &hidden_, &act_,
        &expert_out_, &back_send_, &back_recv_, &grad_send_, &grad_recv_, &d_expert_out_, &d_act_,
        &d_hidden_, &d_expert_in_, &d_back_send_, &d_back_recv_})
    *b = Buffer();
}

std::vector<int> MoeLayer::local_experts() const {
  return {placement_.slot_expert.begin() + rank_ * slots_,
          placement_.slot_expert.begin() + (rank_ + 1) * slots_};
}

std::int64_t MoeLayer::max_exchange_rows() {
  // [receiving rank] rows this rank sends it, then [rank] rows it sends in all: summed over
  // the group, every rank's receive and send totals.
  std::vector<double> rows(static_cast<std::size_t>(2 * ranks_), 0.0);
  const int per_rank = slots_;
  for (int r = 0; r < ranks_; ++r)
    for (int j = 0; j < per_rank; ++j)
      rows[static_cast<std::size_t>(r)] +=
          static_cast<double>(plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)]);
  rows[static_cast<std::size_t>(ranks_ + rank_)] = static_cast<double>(plan_.send_src.size());
  const std::vector<double> all = group_sum(rows);
  return static_cast<std::int64_t>(*std::max_element(all.begin(), all.end()));
}

ExchangeBuffers MoeLayer::lend_exchange_buffers() {
  if (!sim::modeled() || !cfg_.dropless()) return {};
  const std::size_t bytes = static_cast<std::size_t>(cfg_.tokens * cfg_.k * cfg_.h) * e_;
  ensure(send_, bytes);
  ensure(back_recv_, bytes);
  return {send_.data(), back_recv_.data(), bytes};
}

void MoeLayer::permute_in() {
  if (hier_) return;  // the hierarchical dispatch gathers its rows per node itself
  const std::int64_t rows = static_cast<std::int64_t>(plan_.send_src.size());
  ensure(send_, static_cast<std::size_t>(rows * cfg_.h) * e_);
  ops_.gather_rows(rows, cfg_.h, send_src_.as<std::int64_t>(), x_.data(), send_.data());
}

Buffer MoeLayer::view_of(const Buffer& b, std::int64_t row0, std::int64_t rows,
                         std::int64_t cols) const {
  return Buffer(row(b, row0, cols), static_cast<std::size_t>(rows * cols) * e_, [](void*) {});
}

void MoeLayer::dispatch_start() {
  const int per_rank = slots_;
  const std::int64_t h = cfg_.h;
  // Counts first: block (destination, local expert) -> how many rows follow.
  std::vector<double> counts(plan_.send_counts.begin(), plan_.send_counts.end());
  upload(counts_send_, counts.data(), bytes_of(counts));
  std::int64_t before = comm_.bytes().sent;
  comm_.all_to_all(counts_send_.data(), counts_recv_.data(), static_cast<std::size_t>(per_rank),
                   DType::fp64);
  measured_.control += comm_.bytes().sent - before;
  ++fwd_calls_.all_to_all;
  device_.copy_to_host(counts.data(), counts_recv_.data(), bytes_of(counts));
  recv_counts_.assign(counts.begin(), counts.end());

  send_elems_.assign(static_cast<std::size_t>(ranks_), 0);
  recv_elems_.assign(static_cast<std::size_t>(ranks_), 0);
  send_displs_.assign(static_cast<std::size_t>(ranks_), 0);
  recv_displs_.assign(static_cast<std::size_t>(ranks_), 0);
  std::size_t send_off = 0, recv_off = 0;
  for (int r = 0; r < ranks_; ++r) {
    std::int64_t s = 0, g = 0;
    for (int j = 0; j < per_rank; ++j) {
      s += plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)];
      g += recv_counts_[static_cast<std::size_t>(r * per_rank + j)];
    }
    send_elems_[r] = static_cast<std::size_t>(s * h);
    recv_elems_[r] = static_cast<std::size_t>(g * h);
    send_displs_[r] = send_off;
    recv_displs_[r] = recv_off;
    send_off += send_elems_[r];
    recv_off += recv_elems_[r];
  }
  recv_rows_ = static_cast<std::int64_t>(recv_off) / h;
  ensure(recv_, recv_off * e_);
  if (hier_) {
    measured_.control += hier_->plan(plan_, gates_, cfg_.tokens, cfg_.k, per_rank, recv_counts_);
    ++fwd_calls_.all_to_all;
    ++fwd_calls_.all_to_all_v;
    levels_[0] = {};
    hier_->dispatch_start(x_.data(), levels_[0]);
    fwd_calls_.all_to_all_v += 2;
    return;
  }
  measured_.dispatch = all_to_all_v_bytes(send_.data(), send_elems_, send_displs_, recv_.data(),
                                          recv_elems_, recv_displs_);
  ++fwd_calls_.all_to_all_v;
}

void MoeLayer::dispatch_finish() {
  if (hier_) {
    hier_->dispatch_finish(recv_.data(), levels_[0]);
    measured_.dispatch = levels_[0].sent();
    return;
  }
  comm_.finish_all_to_all_v(ticket_);
  ticket_ = -1;
}

std::int64_t MoeLayer::all_to_all_v_bytes(const void* send,
                                          const std::vector<std::size_t>& send_elems,
                                          const std::vector<std::size_t>& send_displs, void* recv,
                                          const std::vector<std::size_t>& recv_elems,
                                          const std::vector<std::size_t>& recv_displs) {
  const std::size_t sent = send_displs.back() + send_elems.back(),
                    got = recv_displs.back() + recv_elems.back();
  if (sent > comm_.max_count() || got > comm_.max_count())
    throw std::runtime_error("moe: one all-to-all-v of " + std::to_string(std::max(sent, got)) +
                             " elements is above this transport's limit");
  const std::int64_t before = comm_.bytes().sent;
  if (of_.owner)  // a micro-batch's: finished by the matching *_finish()
    ticket_ = comm_.start_all_to_all_v(send, send_elems, send_displs, recv, recv_elems, recv_displs,
                                       cfg_.dtype);
  else
    comm_.all_to_all_v(send, send_elems, send_displs, recv, recv_elems, recv_displs, cfg_.dtype);
  return comm_.bytes().sent - before;
}

void MoeLayer::regroup() {
  regroup_ = km::plan_regroup(ranks_, slots_, recv_counts_.data());
  ensure(regroup_gather_, bytes_of(regroup_.gather));
  upload_index(regroup_gather_, regroup_.gather.data(), bytes_of(regroup_.gather));
  ensure(regroup_scatter_, bytes_of(regroup_.scatter));
  upload_index(regroup_scatter_, regroup_.scatter.data(), bytes_of(regroup_.scatter));
  ensure(expert_in_, static_cast<std::size_t>(recv_rows_ * cfg_.h) * e_);
  ops_.gather_rows(recv_rows_, cfg_.h, regroup_gather_.as<std::int64_t>(), recv_.data(),
                   expert_in_.data());
}

void MoeLayer::experts() {
  const std::int64_t h = cfg_.h, d_ff = cfg_.d_ff, w1c = cfg_.w1_cols();
  ensure(hidden_, static_cast<std::size_t>(recv_rows_ * w1c) * e_);
  ensure(act_, static_cast<std::size_t>(recv_rows_ * d_ff) * e_);
  ensure(expert_out_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  std::int64_t offset = 0;
  // One GEMM per local expert over all of its rows (never per token).
  for (std::size_t j = 0; j < w1_.size(); ++j) {
    const std::int64_t n = regroup_.expert_rows[j];
    if (n > 0)
      ops_.gemm(n, w1c, h, row(expert_in_, offset, h), w1_[j].data(), row(hidden_, offset, w1c));
    offset += n;
  }
  if (cfg_.mlp == Mlp::swiglu)
    ops_.silu_mul(recv_rows_, d_ff, hidden_.data(), act_.data());
  else
    ops_.gelu(recv_rows_ * d_ff, hidden_.data(), act_.data());
  offset = 0;
  for (std::size_t j = 0; j < w2_.size(); ++j) {
    const std::int64_t n = regroup_.expert_rows[j];
    if (n > 0)
      ops_.gemm(n, h, d_ff, row(act_, offset, d_ff), w2_[j].data(), row(expert_out_, offset, h));
    offset += n;
  }
}

void MoeLayer::combine_start() {
  const std::int64_t h = cfg_.h;
  ensure(back_send_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  ops_.gather_rows(recv_rows_, h, regroup_scatter_.as<std::int64_t>(), expert_out_.data(),
                   back_send_.data());
  if (hier_) {
    levels_[1] = {};
    hier_->combine_start(back_send_.data(), levels_[1]);
    measured_.combine = levels_[1].sent();
    fwd_calls_.all_to_all_v += 2;
    return;
  }
  const std::size_t sent_rows = plan_.send_src.size();
  ensure(back_recv_, sent_rows * static_cast<std::size_t>(h) * e_);
  // The reverse exchange: what came from rank r goes back to rank r.
  measured_.combine = all_to_all_v_bytes(back_send_.data(), recv_elems_, recv_displs_,
                                         back_recv_.data(), send_elems_, send_displs_);
  ++fwd_calls_.all_to_all_v;
}

void MoeLayer::combine_finish() {
  if (hier_) return hier_->combine_finish(out_.data(), levels_[1]);
  comm_.finish_all_to_all_v(ticket_);
  ticket_ = -1;
  ops_.combine(cfg_.tokens, cfg_.k, cfg_.h, slot_pos_.as<std::int64_t>(), gates_dev_.as<float>(),
               back_recv_.data(), out_.data());
}

void MoeLayer::forward(PhaseTimer& phases) {
  fwd_calls_ = {};
  phases.time("route", [&] { route(); });
  phases.time("permute", [&] { permute_in(); });
  phases.time("dispatch", [&] {
    dispatch_start();
    dispatch_finish();
  });
  phases.time("permute", [&] { regroup(); });
  phases.time("expert", [&] { experts(); });
  phases.time("combine", [&] {
    combine_start();
    combine_finish();
  });
}

StepBytes MoeLayer::implied_bytes() const {
  const int per_rank = slots_;
  const std::int64_t row_bytes = cfg_.h * static_cast<std::int64_t>(e_);
  StepBytes b;
  b.control = static_cast<std::int64_t>(ranks_ - 1) * per_rank * 8;
  if (capacity_ >= 0)
    b.control += static_cast<std::int64_t>(ranks_ - 1) * 2 * cfg_.tokens * cfg_.k * 8;
  if (hier_) {
    // The rail's counts (rows, records per peer) and the records: 3 doubles per copy.
    b.control +=
        static_cast<std::int64_t>(hier_->nodes() - 1) * 2 * 8 + hier_->inter_records_sent() * 3 * 8;
    b.dispatch = (hier_->inter_rows_sent() + hier_->intra_rows_sent()) * row_bytes;
    b.combine = (hier_->intra_rows_received() + hier_->inter_rows_returned()) * row_bytes;
    return b;
  }
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    for (int j = 0; j < per_rank; ++j) {
      b.dispatch += plan_.send_counts[static_cast<std::size_t>(r * per_rank + j)] * row_bytes;
      b.combine += recv_counts_[static_cast<std::size_t>(r * per_rank + j)] * row_bytes;
    }
  }
  return b;
}

double MoeLayer::expert_flops() const {
  const double per_row = (cfg_.mlp == Mlp::swiglu ? 6.0 : 4.0) * cfg_.h * cfg_.d_ff;
  return per_row * static_cast<double>(recv_rows_);
}

std::vector<double> MoeLayer::group_sum(const std::vector<double>& v) {
  sim::KeepData keep;  // read back: real in modeled mode too
  Buffer in = device_.alloc(std::max<std::size_t>(bytes_of(v), 8)),
         out = device_.alloc(std::max<std::size_t>(bytes_of(v), 8));
  upload(in, v.data(), bytes_of(v));
  comm_.all_reduce(in.data(), out.data(), v.size(), DType::fp64);
  std::vector<double> sum(v.size());
  device_.copy_to_host(sum.data(), out.data(), bytes_of(sum));
  return sum;
}

std::vector<double> MoeLayer::group_gather(const std::vector<double>& v) {
  sim::KeepData keep;  // read back: real in modeled mode too
  std::vector<double> all(v.size() * static_cast<std::size_t>(ranks_));
  ensure(meta_send_, bytes_of(v));
  ensure(meta_recv_, bytes_of(all));
  upload(meta_send_, v.data(), bytes_of(v));
  comm_.all_gather(meta_send_.data(), meta_recv_.data(), v.size(), DType::fp64);
  device_.copy_to_host(all.data(), meta_recv_.data(), bytes_of(all));
  return all;
}

void MoeLayer::upload(Buffer& dst, const void* src, std::size_t bytes) {
  if (bytes > 0) device_.copy_from_host(dst.data(), src, bytes);
}

// Index arrays (send rows, slots, regroup orders): moe_buffers.hpp's rule.
void MoeLayer::upload_index(Buffer& dst, const void* src, std::size_t bytes) {
  moe::upload_index(device_, dst, src, bytes);
}

void MoeLayer::upload_values(Buffer& dst, const std::vector<double>& values) {
  auto bytes = encode(values, cfg_.dtype);
  upload(dst, bytes.data(), bytes.size());
}

std::vector<double> MoeLayer::to_host(const Buffer& b, std::int64_t n) const {
  std::vector<std::byte> raw(static_cast<std::size_t>(n) * e_);
  device_.copy_to_host(raw.data(), b.data(), raw.size());
  return decode(raw.data(), static_cast<std::size_t>(n), cfg_.dtype);
}

void* MoeLayer::row(const Buffer& b, std::int64_t r, std::int64_t cols) const {
  return static_cast<std::byte*>(b.data()) + r * cols * static_cast<std::int64_t>(e_);
}

}  // namespace suite::moe

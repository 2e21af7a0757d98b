#include "bench/moe/moe_layer.hpp"

#include <algorithm>
#include <cstring>

#include "bench/moe/moe_buffers.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"
#include "common/device/typed_host.hpp"
#include "kernels/core/counter_rng.hpp"

namespace suite::moe {
namespace {

namespace km = kernels::moe;

}  // namespace

void MoeLayer::ensure(Buffer& b, std::size_t bytes) {
  grow(device_, b, bytes);
}

MoeLayer::MoeLayer(const MoeConfig& cfg, Device& device, Comm& group, MoeOps& ops,
                   std::int64_t first_token, NodeComms comms)
    : cfg_(cfg),
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
  x_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  init(x_, Tensor::input, 0, first_token, T, h);
  w_router_ = device.alloc(static_cast<std::size_t>(h * E) * e_);
  init(w_router_, Tensor::router, 0, 0, h, E);
  placement_ = block_placement(cfg.experts, ranks_);
  slots_ = placement_.slots_per_rank;
  init_experts();
  logits_ = device.alloc(static_cast<std::size_t>(T * E) * e_);
  out_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
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
  dy_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  init(dy_, Tensor::grad_output, 0, first_token, T, h);
  dx_ = device.alloc(static_cast<std::size_t>(T * h) * e_);
  dw_router_ = device.alloc(static_cast<std::size_t>(h * E) * e_);
  dlogits_ = device.alloc(static_cast<std::size_t>(T * E) * e_);
}

// The weights (and their gradients) of this rank's slots, each the weights of its expert.
void MoeLayer::init_experts() {
  const std::int64_t h = cfg_.h;
  w1_.clear();
  w2_.clear();
  dw1_.clear();
  dw2_.clear();
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

std::vector<int> MoeLayer::local_experts() const {
  return {placement_.slot_expert.begin() + rank_ * slots_,
          placement_.slot_expert.begin() + (rank_ + 1) * slots_};
}

void MoeLayer::set_select_bias(const std::vector<float>& bias) {
  SUITE_CHECK(bias.size() == static_cast<std::size_t>(cfg_.experts), "one bias per expert");
  sim::KeepData keep;
  select_bias_host_ = bias;
  ensure(select_bias_, bytes_of(bias));
  upload(select_bias_, bias.data(), bytes_of(bias));
  routing_drawn_ = drops_settled_ = false;  // a new routing
}

void MoeLayer::route() {
  const std::int64_t T = cfg_.tokens, E = cfg_.experts;
  const int k = cfg_.k;
  if (sim::modeled()) {
    route_drawn();
  } else {
    ops_.router_logits(T, E, cfg_.h, x_.data(), w_router_.data(), logits_.data());
    std::vector<float> zeros(static_cast<std::size_t>(E), 0.0f);
    upload(prob_sum_dev_, zeros.data(), bytes_of(zeros));
    ops_.router(T, cfg_.experts, k, logits_.data(), logit_bias_.as<float>(),
                select_bias_.as<float>(), chosen_dev_.as<std::int32_t>(), gates_dev_.as<float>(),
                prob_sum_dev_.as<float>(), cfg_.node_limit());
    device_.copy_to_host(chosen_.data(), chosen_dev_.data(), bytes_of(chosen_));
    device_.copy_to_host(gates_.data(), gates_dev_.data(), bytes_of(gates_));
    device_.copy_to_host(prob_sum_.data(), prob_sum_dev_.data(), bytes_of(prob_sum_));
  }

  measured_ = {};
  if (capacity_ >= 0 && sim::modeled()) {
    modeled_drops();
  } else if (capacity_ >= 0) {
    // Every rank needs the group's (expert, gate) pairs to apply the same drop rule.
    const std::int64_t copies = T * k;
    const std::int64_t before = comm_.bytes().sent;
    const std::vector<std::uint8_t> all_keep = group_drop_rule();
    measured_.control += comm_.bytes().sent - before;
    ++fwd_calls_.all_gather;
    std::copy_n(all_keep.begin() + rank_ * copies, copies, keep_.begin());
  }
  // Each copy's slot: its expert's own, or under redundant experts one of its replicas by the
  // split rule (the n-th copy this rank routes to an expert goes to replica n mod replicas).
  phys_chosen_.assign(chosen_.begin(), chosen_.end());
  if (placement_.redundant() > 0) {
    std::vector<std::int64_t> seen(static_cast<std::size_t>(cfg_.experts), 0);
    for (auto& e : phys_chosen_)
      e = replica_for_copy(placement_, e, seen[static_cast<std::size_t>(e)]++);
  }
  plan_ = km::plan_dispatch(T, k, placement_.slots(), ranks_, phys_chosen_.data(), keep_.data());
  ensure(send_src_, bytes_of(plan_.send_src));
  upload_index(send_src_, plan_.send_src.data(), bytes_of(plan_.send_src));
  ensure(slot_pos_, bytes_of(plan_.slot_pos));
  upload_index(slot_pos_, plan_.slot_pos.data(), bytes_of(plan_.slot_pos));
}

// Modeled compute: x holds no values, so the logits are drawn (drawn_logits: keyed by seed,
// global token and expert), a chunk of tokens at a time, and routed on the host by the CPU
// kernels' softmax + skew bias + top-k + selection bias; the router GEMM's FLOPs are injected
// as if it had run (ModeledMoeOps::router_logits computes nothing). The draws depend on the
// seed, the tokens and the biases alone, so they are made once per selection bias: host work
// takes no simulated time here, and O(T E) of it per rank and step is most of a large run's.
void MoeLayer::route_drawn() {
  const std::int64_t T = cfg_.tokens, E = cfg_.experts;
  const int k = cfg_.k;
  ops_.router_logits(T, E, cfg_.h, x_.data(), w_router_.data(), logits_.data());
  if (routing_drawn_) return;
  routing_drawn_ = true;
  const std::int64_t chunk = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / E);
  std::vector<float> z(static_cast<std::size_t>(std::min(chunk, T) * E));
  std::vector<double> sums(static_cast<std::size_t>(E), 0.0);
  for (std::int64_t t0 = 0; t0 < T; t0 += chunk) {
    const std::int64_t rows = std::min(chunk, T - t0);
    drawn_logits(cfg_, first_token_ + t0, rows, z.data());
    km::cpu::router_topk<float>(rows, cfg_.experts, k, z.data(), logit_bias_host_.data(),
                                select_bias_host_.data(), chosen_.data() + t0 * k,
                                gates_.data() + t0 * k, sums.data(), cfg_.node_limit());
  }
  for (std::size_t e = 0; e < sums.size(); ++e)
    prob_sum_[e] = static_cast<float>(sums[e]);
  // The device copies stay unwritten (so untouched, not resident): modeled ops read none.
}

// Modeled compute under a capacity factor. The executed layer all-gathers the group's
// (expert, gate) pairs and applies the drop rule to all of them: O(T k N_e) values per rank,
// which N_e simulated ranks in one process cannot hold at scale. Here the drops are settled
// once per routing by settle_drops (exact, O(T k) per rank), and every step makes the same
// all-gather on placeholders: its bytes and simulated time, no values.
void MoeLayer::modeled_drops() {
  const std::uint64_t routing = routing_fingerprint();
  if (!drops_settled_) {
    settle_drops();
    settled_routing_ = routing;
    drops_settled_ = true;
  }
  SUITE_CHECK(routing == settled_routing_,
              "moe: the modeled routing changed since its drops were settled");
  const std::size_t mine = static_cast<std::size_t>(2 * cfg_.tokens * cfg_.k);
  // At least kPlaceholderMinBytes, so that both are placeholders however small the case.
  ensure(meta_ph_send_, std::max(mine * sizeof(double), sim::kPlaceholderMinBytes));
  ensure(meta_ph_recv_, std::max(mine * ranks_ * sizeof(double), sim::kPlaceholderMinBytes));
  const std::int64_t before = comm_.bytes().sent;
  comm_.all_gather(meta_ph_send_.data(), meta_ph_recv_.data(), mine, DType::fp64);
  measured_.control += comm_.bytes().sent - before;
  ++fwd_calls_.all_gather;
}

// The drop rule (km::capacity_keep over the group's copies) without holding the group's
// routing: each copy's gate goes to its expert's owner (counts all-to-all, then the gates
// all-to-all-v, 4 bytes a copy), the owner applies capacity_keep to the copies of its experts
// and returns each copy's keep flag the same way. The owner receives an expert's copies in
// (source rank, token, slot) order, i.e. in global copy order, so capacity_keep's tie-break by
// position is the group's by global copy index: the same decisions as the all-gather's. Setup
// traffic (not in measured_); small groups cross-check against the all-gather rule.
void MoeLayer::settle_drops() {
  sim::KeepData keep_real;
  const std::int64_t T = cfg_.tokens, copies = T * cfg_.k;
  const int per_rank = cfg_.experts_per_rank(), E = cfg_.experts;
  const std::vector<std::uint8_t> all_kept(static_cast<std::size_t>(copies), 1);
  const km::DispatchPlan p =
      km::plan_dispatch(T, cfg_.k, E, ranks_, chosen_.data(), all_kept.data());
  std::vector<float> send_gates(p.send_src.size());
  for (std::int64_t c = 0; c < copies; ++c)
    send_gates[static_cast<std::size_t>(p.slot_pos[static_cast<std::size_t>(c)])] =
        gates_[static_cast<std::size_t>(c)];
  std::vector<double> counts(p.send_counts.begin(), p.send_counts.end());
  Buffer counts_send = device_.alloc(bytes_of(counts)),
         counts_recv = device_.alloc(bytes_of(counts));
  upload(counts_send, counts.data(), bytes_of(counts));
  comm_.all_to_all(counts_send.data(), counts_recv.data(), static_cast<std::size_t>(per_rank),
                   DType::fp64);
  device_.copy_to_host(counts.data(), counts_recv.data(), bytes_of(counts));
  std::vector<std::size_t> send_elems(static_cast<std::size_t>(ranks_)),
      recv_elems(send_elems.size()), send_displs(send_elems.size()), recv_displs(send_elems.size());
  std::size_t send_off = 0, recv_off = 0;
  for (int r = 0; r < ranks_; ++r) {
    std::size_t s = 0, g = 0;
    for (int j = 0; j < per_rank; ++j) {
      s += static_cast<std::size_t>(p.send_counts[static_cast<std::size_t>(r * per_rank + j)]);
      g += static_cast<std::size_t>(counts[static_cast<std::size_t>(r * per_rank + j)]);
    }
    send_elems[r] = s;
    recv_elems[r] = g;
    send_displs[r] = send_off;
    recv_displs[r] = recv_off;
    send_off += s;
    recv_off += g;
  }
  // The owner's side: received rows in [source rank][local expert] blocks.
  std::vector<float> recv_gates(recv_off);
  {
    Buffer gs = device_.alloc(std::max<std::size_t>(send_off, 1) * sizeof(float)),
           gr = device_.alloc(std::max<std::size_t>(recv_off, 1) * sizeof(float));
    upload(gs, send_gates.data(), bytes_of(send_gates));
    comm_.all_to_all_v(gs.data(), send_elems, send_displs, gr.data(), recv_elems, recv_displs,
                       DType::fp32);
    device_.copy_to_host(recv_gates.data(), gr.data(), bytes_of(recv_gates));
  }
  std::vector<std::int32_t> recv_expert;
  recv_expert.reserve(recv_off);
  for (int r = 0; r < ranks_; ++r)
    for (int j = 0; j < per_rank; ++j)
      recv_expert.insert(
          recv_expert.end(),
          static_cast<std::size_t>(counts[static_cast<std::size_t>(r * per_rank + j)]), j);
  std::vector<std::uint8_t> recv_keep(recv_off);
  km::capacity_keep(static_cast<std::int64_t>(recv_off), recv_expert.data(), recv_gates.data(),
                    per_rank, capacity_, recv_keep.data());
  // The flags home along the reverse route, as fp32 0/1.
  std::vector<float> flags(recv_keep.begin(), recv_keep.end()), sent_flags(send_off);
  {
    Buffer fs = device_.alloc(std::max<std::size_t>(recv_off, 1) * sizeof(float)),
           fr = device_.alloc(std::max<std::size_t>(send_off, 1) * sizeof(float));
    upload(fs, flags.data(), bytes_of(flags));
    comm_.all_to_all_v(fs.data(), recv_elems, recv_displs, fr.data(), send_elems, send_displs,
                       DType::fp32);
    device_.copy_to_host(sent_flags.data(), fr.data(), bytes_of(sent_flags));
  }
  for (std::int64_t c = 0; c < copies; ++c)
    keep_[static_cast<std::size_t>(c)] =
        sent_flags[static_cast<std::size_t>(p.slot_pos[static_cast<std::size_t>(c)])] > 0.5f ? 1
                                                                                             : 0;
  // Small groups: the same decisions as the executed layer's rule over the gathered routing.
  constexpr std::int64_t kCrossCheckCopies = std::int64_t{1} << 16;
  if (copies * ranks_ > kCrossCheckCopies) return;
  const std::vector<std::uint8_t> all_keep = group_drop_rule();
  SUITE_CHECK(std::equal(keep_.begin(), keep_.end(), all_keep.begin() + rank_ * copies),
              "moe: the experts' owners settled other drops than the group's drop rule");
}

// The drop rule over the whole group: every rank gathers the group's (expert, gate) pairs and
// applies capacity_keep to all of them, so every rank reaches the same decisions.
std::vector<std::uint8_t> MoeLayer::group_drop_rule() {
  const std::int64_t copies = static_cast<std::int64_t>(chosen_.size());
  std::vector<double> meta(static_cast<std::size_t>(2 * copies));
  for (std::int64_t c = 0; c < copies; ++c) {
    meta[static_cast<std::size_t>(2 * c)] = chosen_[static_cast<std::size_t>(c)];
    meta[static_cast<std::size_t>(2 * c + 1)] = gates_[static_cast<std::size_t>(c)];
  }
  const std::vector<double> all = group_gather(meta);
  const std::int64_t total = copies * ranks_;
  std::vector<std::int32_t> all_chosen(static_cast<std::size_t>(total));
  std::vector<float> all_gates(static_cast<std::size_t>(total));
  for (std::int64_t c = 0; c < total; ++c) {
    all_chosen[static_cast<std::size_t>(c)] =
        static_cast<std::int32_t>(all[static_cast<std::size_t>(2 * c)]);
    all_gates[static_cast<std::size_t>(c)] =
        static_cast<float>(all[static_cast<std::size_t>(2 * c + 1)]);
  }
  std::vector<std::uint8_t> all_keep(static_cast<std::size_t>(total));
  km::capacity_keep(total, all_chosen.data(), all_gates.data(), cfg_.experts, capacity_,
                    all_keep.data());
  return all_keep;
}

std::uint64_t MoeLayer::routing_fingerprint() const {
  std::uint64_t f = 0;
  for (std::size_t c = 0; c < chosen_.size(); ++c) {
    std::uint32_t gate = 0;
    std::memcpy(&gate, &gates_[c], sizeof gate);
    f = kernels::mix64(
        f ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(chosen_[c])) << 32 | gate));
  }
  return f;
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

void MoeLayer::dispatch() {
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
    levels_[0] = hier_->dispatch(x_.data(), recv_.data());
    measured_.dispatch = levels_[0].sent();
    fwd_calls_.all_to_all_v += 2;
    return;
  }
  measured_.dispatch = all_to_all_v_bytes(send_.data(), send_elems_, send_displs_, recv_.data(),
                                          recv_elems_, recv_displs_);
  ++fwd_calls_.all_to_all_v;
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

void MoeLayer::combine() {
  const std::int64_t h = cfg_.h;
  ensure(back_send_, static_cast<std::size_t>(recv_rows_ * h) * e_);
  ops_.gather_rows(recv_rows_, h, regroup_scatter_.as<std::int64_t>(), expert_out_.data(),
                   back_send_.data());
  if (hier_) {
    levels_[1] = hier_->combine(back_send_.data(), out_.data());
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
  ops_.combine(cfg_.tokens, cfg_.k, h, slot_pos_.as<std::int64_t>(), gates_dev_.as<float>(),
               back_recv_.data(), out_.data());
}

void MoeLayer::forward(PhaseTimer& phases) {
  fwd_calls_ = {};
  phases.time("route", [&] { route(); });
  phases.time("permute", [&] { permute_in(); });
  phases.time("dispatch", [&] { dispatch(); });
  phases.time("permute", [&] { regroup(); });
  phases.time("expert", [&] { experts(); });
  phases.time("combine", [&] { combine(); });
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

// MoeLayer's router: the selection bias, the route phase (router GEMM, softmax, top-k, drawn
// logits under modeled compute) and the capacity factor's drop rule, over the group or settled
// by the experts' owners.
#include <algorithm>
#include <cstring>

#include "bench/moe/moe_buffers.hpp"
#include "bench/moe/moe_layer.hpp"
#include "common/device/typed_host.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"
#include "kernels/core/counter_rng.hpp"

namespace suite::moe {
namespace {

namespace km = kernels::moe;

}  // namespace

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
    // A micro-batch counts on from the copies its rank's earlier micro-batches routed.
    std::vector<std::int64_t> seen = copies_before_;
    seen.resize(static_cast<std::size_t>(cfg_.experts), 0);
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

}  // namespace suite::moe

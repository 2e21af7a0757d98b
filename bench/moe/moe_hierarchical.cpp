#include "bench/moe/moe_hierarchical.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "bench/moe/moe_buffers.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"

namespace suite::moe {
namespace {

std::int64_t sum(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

constexpr int kRecordFields = 3;  // relay row (within the peer's rows), destination, gate

}  // namespace

HierarchicalExchange::HierarchicalExchange(Device& device, MoeOps& ops, Comm& node, Comm& rail,
                                           DType t, std::int64_t h)
    : device_(device),
      ops_(ops),
      node_(node),
      rail_(rail),
      t_(t),
      h_(h),
      row_bytes_(static_cast<std::size_t>(h) * dtype_size(t)),
      P_(node.size()),
      M_(rail.size()) {}

void HierarchicalExchange::ensure(Buffer& b, std::size_t bytes) {
  grow(device_, b, bytes);
}

void HierarchicalExchange::upload_index(Buffer& dst, const std::vector<std::int64_t>& v) {
  ensure(dst, bytes_of(v));
  moe::upload_index(device_, dst, v.data(), bytes_of(v));
}

std::int64_t HierarchicalExchange::plan(const kernels::moe::DispatchPlan& flat,
                                        const std::vector<float>& gates, std::int64_t tokens, int k,
                                        int experts_per_rank,
                                        const std::vector<std::int64_t>& recv_counts) {
  T_ = tokens;
  k_ = k;
  const int me_node = rail_.rank(), me_local = node_.rank(), ranks = P_ * M_;
  const auto R = static_cast<std::size_t>(ranks), Mz = static_cast<std::size_t>(M_);
  SUITE_CHECK(flat.send_counts.size() == R * static_cast<std::size_t>(experts_per_rank) &&
                  recv_counts.size() == flat.send_counts.size(),
              "hierarchical: one count per (rank, local expert)");
  auto block_rows = [&](const std::vector<std::int64_t>& counts, int r) {
    std::int64_t n = 0;
    for (int j = 0; j < experts_per_rank; ++j)
      n += counts[static_cast<std::size_t>(r * experts_per_rank + j)];
    return n;
  };
  std::vector<std::int64_t> send_off(R + 1, 0);
  for (int r = 0; r < ranks; ++r)
    send_off[static_cast<std::size_t>(r) + 1] =
        send_off[static_cast<std::size_t>(r)] + block_rows(flat.send_counts, r);
  std::vector<std::int64_t> row_copy(flat.send_src.size(), -1);
  for (std::size_t c = 0; c < flat.slot_pos.size(); ++c)
    if (flat.slot_pos[c] >= 0)
      row_copy[static_cast<std::size_t>(flat.slot_pos[c])] = static_cast<std::int64_t>(c);

  // Home: per node, the distinct tokens with a copy there (in send order) and one record per
  // copy; the records to node N are flat's send rows to N's ranks, in flat's order.
  home_rows_.assign(Mz, 0);
  home_records_.assign(Mz, 0);
  home_src_.clear();
  home_record_copy_.clear();
  home_slot_.assign(static_cast<std::size_t>(T_) * Mz, -1);
  std::vector<double> records;
  std::vector<std::int64_t> seen(static_cast<std::size_t>(T_), -1), pos(seen.size(), 0);
  for (int n = 0; n < M_; ++n) {
    const std::int64_t first = static_cast<std::int64_t>(home_src_.size());
    for (std::int64_t i = send_off[static_cast<std::size_t>(n) * P_];
         i < send_off[static_cast<std::size_t>(n + 1) * P_]; ++i) {
      const std::int64_t t = flat.send_src[static_cast<std::size_t>(i)];
      const auto tz = static_cast<std::size_t>(t);
      if (seen[tz] != n) {
        seen[tz] = n;
        pos[tz] = static_cast<std::int64_t>(home_src_.size()) - first;
        home_slot_[tz * Mz + static_cast<std::size_t>(n)] =
            static_cast<std::int64_t>(home_src_.size());
        home_src_.push_back(t);
      }
      // The destination rank: the last rank whose send rows start at or before i.
      const auto d = static_cast<int>(std::upper_bound(send_off.begin(), send_off.end(), i) -
                                      send_off.begin() - 1);
      const std::int64_t copy = row_copy[static_cast<std::size_t>(i)];
      records.push_back(static_cast<double>(pos[tz]));
      records.push_back(static_cast<double>(d - n * P_));
      records.push_back(static_cast<double>(gates[static_cast<std::size_t>(copy)]));
      home_record_copy_.push_back(copy);
    }
    home_rows_[static_cast<std::size_t>(n)] = static_cast<std::int64_t>(home_src_.size()) - first;
    home_records_[static_cast<std::size_t>(n)] =
        send_off[static_cast<std::size_t>(n + 1) * P_] - send_off[static_cast<std::size_t>(n) * P_];
  }
  home_total_ = sum(home_rows_);
  inter_rows_ = home_total_ - home_rows_[static_cast<std::size_t>(me_node)];
  inter_records_ = sum(home_records_) - home_records_[static_cast<std::size_t>(me_node)];
  intra_rows_ = 0;
  for (int s = 0; s < ranks; ++s)
    if (s % P_ != me_local) intra_rows_ += block_rows(recv_counts, s);

  // The rail's control exchange: (rows, records) per peer, then the records. Real data in
  // modeled compute too: the relays plan on it.
  std::vector<double> relay_records;
  const std::int64_t before = rail_.bytes().sent;
  {
    sim::KeepData keep;
    std::vector<double> counts(2 * Mz), got(2 * Mz);
    for (std::size_t n = 0; n < Mz; ++n) {
      counts[2 * n] = static_cast<double>(home_rows_[n]);
      counts[2 * n + 1] = static_cast<double>(home_records_[n]);
    }
    Buffer cs = device_.alloc(bytes_of(counts)), cr = device_.alloc(bytes_of(got));
    device_.copy_from_host(cs.data(), counts.data(), bytes_of(counts));
    rail_.all_to_all(cs.data(), cr.data(), 2, DType::fp64);
    device_.copy_to_host(got.data(), cr.data(), bytes_of(got));
    relay_rows_.assign(Mz, 0);
    relay_records_.assign(Mz, 0);
    for (std::size_t n = 0; n < Mz; ++n) {
      relay_rows_[n] = static_cast<std::int64_t>(got[2 * n]);
      relay_records_[n] = static_cast<std::int64_t>(got[2 * n + 1]);
    }
    relay_records.resize(static_cast<std::size_t>(sum(relay_records_)) * kRecordFields);
    Buffer rs = device_.alloc(std::max<std::size_t>(records.size(), 1) * sizeof(double)),
           rr = device_.alloc(std::max<std::size_t>(relay_records.size(), 1) * sizeof(double));
    if (!records.empty()) device_.copy_from_host(rs.data(), records.data(), bytes_of(records));
    LevelBytes control_bytes;  // counted below from the rail's total, with the counts
    a2av(rail_, rs.data(), home_records_, rr.data(), relay_records_, kRecordFields, DType::fp64,
         control_bytes, true);
    if (!relay_records.empty())
      device_.copy_to_host(relay_records.data(), rr.data(), bytes_of(relay_records));
  }
  const std::int64_t control = rail_.bytes().sent - before;

  // Relay: the fan-out to each node peer q is, for every rail peer in node order, its records
  // bound for q in record order: for each source, flat's block from it to q.
  std::vector<std::int64_t> relay_off(Mz + 1, 0);
  for (std::size_t n = 0; n < Mz; ++n)
    relay_off[n + 1] = relay_off[n] + relay_rows_[n];
  relay_total_ = relay_off[Mz];
  std::vector<std::vector<std::int64_t>> by_dest(static_cast<std::size_t>(P_));
  std::vector<std::int64_t> record_row;  // per received record: its relay row
  for (std::size_t n = 0, r = 0; n < Mz; ++n)
    for (std::int64_t i = 0; i < relay_records_[n]; ++i, ++r) {
      const auto q = static_cast<std::int64_t>(relay_records[r * kRecordFields + 1]);
      SUITE_CHECK(q >= 0 && q < P_, "hierarchical: a record names no rank of this node");
      by_dest[static_cast<std::size_t>(q)].push_back(static_cast<std::int64_t>(r));
      record_row.push_back(relay_off[n] +
                           static_cast<std::int64_t>(relay_records[r * kRecordFields]));
    }
  fan_rows_.assign(static_cast<std::size_t>(P_), 0);
  fan_src_.clear();
  std::vector<std::int64_t> copies_of(static_cast<std::size_t>(relay_total_), 0);
  for (std::size_t q = 0; q < by_dest.size(); ++q) {
    fan_rows_[q] = static_cast<std::int64_t>(by_dest[q].size());
    for (std::int64_t r : by_dest[q]) {
      fan_src_.push_back(record_row[static_cast<std::size_t>(r)]);
      ++copies_of[static_cast<std::size_t>(record_row[static_cast<std::size_t>(r)])];
    }
  }
  fan_total_ = static_cast<std::int64_t>(fan_src_.size());
  fan_out_rows_ = fan_total_ - fan_rows_[static_cast<std::size_t>(me_local)];
  relay_inter_rows_ = relay_total_ - relay_rows_[static_cast<std::size_t>(me_node)];
  relay_inter_records_ = sum(relay_records_) - relay_records_[static_cast<std::size_t>(me_node)];
  kmax_ = 1;
  for (auto n : copies_of)
    kmax_ = std::max(kmax_, static_cast<int>(n));
  const auto slots = static_cast<std::size_t>(relay_total_) * static_cast<std::size_t>(kmax_);
  relay_slot_.assign(slots, -1);
  relay_slot_record_.assign(slots, -1);
  relay_gates_.assign(slots, 0.0f);
  std::fill(copies_of.begin(), copies_of.end(), 0);
  std::int64_t f = 0;
  for (const auto& records_q : by_dest)
    for (std::int64_t r : records_q) {
      const std::int64_t a = record_row[static_cast<std::size_t>(r)];
      const std::size_t s = static_cast<std::size_t>(a) * static_cast<std::size_t>(kmax_) +
                            static_cast<std::size_t>(copies_of[static_cast<std::size_t>(a)]++);
      relay_slot_[s] = f++;
      relay_slot_record_[s] = r;
      relay_gates_[s] =
          static_cast<float>(relay_records[static_cast<std::size_t>(r) * kRecordFields + 2]);
    }

  // Receiver: from node peer q', for every node in order, flat's block from source
  // (node, q') to this rank; placed where flat's all-to-all-v puts that source's block.
  std::vector<std::int64_t> flat_off(R + 1, 0);
  for (int s = 0; s < ranks; ++s)
    flat_off[static_cast<std::size_t>(s) + 1] =
        flat_off[static_cast<std::size_t>(s)] + block_rows(recv_counts, s);
  recv_total_ = flat_off[R];
  fanin_rows_.assign(static_cast<std::size_t>(P_), 0);
  to_flat_.assign(static_cast<std::size_t>(recv_total_), 0);
  from_flat_.assign(static_cast<std::size_t>(recv_total_), 0);
  std::int64_t g = 0;
  for (int q = 0; q < P_; ++q)
    for (int n = 0; n < M_; ++n) {
      const int s = n * P_ + q;
      for (std::int64_t i = flat_off[static_cast<std::size_t>(s)];
           i < flat_off[static_cast<std::size_t>(s) + 1]; ++i, ++g) {
        to_flat_[static_cast<std::size_t>(i)] = g;
        from_flat_[static_cast<std::size_t>(g)] = i;
      }
      fanin_rows_[static_cast<std::size_t>(q)] += block_rows(recv_counts, s);
    }

  upload_index(home_src_dev_, home_src_);
  upload_index(home_slot_dev_, home_slot_);
  upload_index(fan_src_dev_, fan_src_);
  upload_index(relay_slot_dev_, relay_slot_);
  upload_index(to_flat_dev_, to_flat_);
  upload_index(from_flat_dev_, from_flat_);
  ensure(relay_gates_dev_, bytes_of(relay_gates_));
  if (!sim::modeled() && !relay_gates_.empty())
    device_.copy_from_host(relay_gates_dev_.data(), relay_gates_.data(), bytes_of(relay_gates_));
  return control;
}

void HierarchicalExchange::a2av(Comm& c, const void* send, const std::vector<std::int64_t>& send_n,
                                void* recv, const std::vector<std::int64_t>& recv_n,
                                std::int64_t elems, DType t, LevelBytes& b, bool inter,
                                bool start_only) {
  const std::size_t n = send_n.size();
  std::vector<std::size_t> se(n), sd(n), re(n), rd(n);
  std::size_t so = 0, ro = 0;
  for (std::size_t i = 0; i < n; ++i) {
    se[i] = static_cast<std::size_t>(send_n[i] * elems);
    re[i] = static_cast<std::size_t>(recv_n[i] * elems);
    sd[i] = so;
    rd[i] = ro;
    so += se[i];
    ro += re[i];
  }
  if (so > c.max_count() || ro > c.max_count())
    throw std::runtime_error("moe: one hierarchical all-to-all-v of " +
                             std::to_string(std::max(so, ro)) +
                             " elements is above this transport's limit");
  const ByteCounts before = c.bytes();
  if (start_only && rail_nonblocking_)
    rail_ticket_ = c.start_all_to_all_v(send, se, sd, recv, re, rd, t);
  else
    c.all_to_all_v(send, se, sd, recv, re, rd, t);
  const std::int64_t sent = c.bytes().sent - before.sent, got = c.bytes().recv - before.recv;
  (inter ? b.inter_sent : b.intra_sent) += sent;
  (inter ? b.inter_recv : b.intra_recv) += got;
}

void HierarchicalExchange::rows_a2av(Comm& c, const void* send,
                                     const std::vector<std::int64_t>& send_rows, void* recv,
                                     const std::vector<std::int64_t>& recv_rows, LevelBytes& b,
                                     bool inter, bool start_only) {
  a2av(c, send, send_rows, recv, recv_rows, h_, t_, b, inter, start_only);
}

LevelBytes HierarchicalExchange::dispatch(const void* x, void* recv) {
  LevelBytes b;
  dispatch_start(x, b);
  dispatch_finish(recv, b);
  return b;
}

LevelBytes HierarchicalExchange::combine(const void* back, void* out) {
  LevelBytes b;
  combine_start(back, b);
  combine_finish(out, b);
  return b;
}

LevelBytes HierarchicalExchange::combine_backward(const void* dy, void* grad_recv,
                                                  float* gate_grad) {
  LevelBytes b;
  combine_backward_start(dy, b);
  combine_backward_finish(grad_recv, gate_grad, b);
  return b;
}

LevelBytes HierarchicalExchange::dispatch_backward(const void* grad_back, void* dx) {
  LevelBytes b;
  dispatch_backward_start(grad_back, b);
  dispatch_backward_finish(dx, b);
  return b;
}

void HierarchicalExchange::finish_rail() {
  rail_.finish_all_to_all_v(rail_ticket_);
  rail_ticket_ = -1;
}

void HierarchicalExchange::dispatch_start(const void* x, LevelBytes& b) {
  ensure(home_send_, static_cast<std::size_t>(home_total_) * row_bytes_);
  ops_.gather_rows(home_total_, h_, home_src_dev_.as<std::int64_t>(), x, home_send_.data());
  ensure(relay_recv_, static_cast<std::size_t>(relay_total_) * row_bytes_);
  rows_a2av(rail_, home_send_.data(), home_rows_, relay_recv_.data(), relay_rows_, b, true, true);
}

void HierarchicalExchange::dispatch_finish(void* recv, LevelBytes& b) {
  finish_rail();
  ensure(fan_send_, static_cast<std::size_t>(fan_total_) * row_bytes_);
  ops_.gather_rows(fan_total_, h_, fan_src_dev_.as<std::int64_t>(), relay_recv_.data(),
                   fan_send_.data());
  ensure(fan_recv_, static_cast<std::size_t>(recv_total_) * row_bytes_);
  rows_a2av(node_, fan_send_.data(), fan_rows_, fan_recv_.data(), fanin_rows_, b, false);
  ops_.gather_rows(recv_total_, h_, to_flat_dev_.as<std::int64_t>(), fan_recv_.data(), recv);
}

void HierarchicalExchange::combine_start(const void* back, LevelBytes& b) {
  ops_.gather_rows(recv_total_, h_, from_flat_dev_.as<std::int64_t>(), back, fan_recv_.data());
  ensure(relay_y_, static_cast<std::size_t>(fan_total_) * row_bytes_);  // kept for the backward
  rows_a2av(node_, fan_recv_.data(), fanin_rows_, relay_y_.data(), fan_rows_, b, false);
  ensure(partial_, static_cast<std::size_t>(relay_total_) * row_bytes_);
  ops_.combine(relay_total_, kmax_, h_, relay_slot_dev_.as<std::int64_t>(),
               relay_gates_dev_.as<float>(), relay_y_.data(), partial_.data());
  ensure(home_back_, static_cast<std::size_t>(home_total_) * row_bytes_);
  rows_a2av(rail_, partial_.data(), relay_rows_, home_back_.data(), home_rows_, b, true, true);
}

void HierarchicalExchange::combine_finish(void* out, LevelBytes&) {
  finish_rail();
  ops_.combine(T_, M_, h_, home_slot_dev_.as<std::int64_t>(), nullptr, home_back_.data(), out);
}

void HierarchicalExchange::combine_backward_start(const void* dy, LevelBytes& b) {
  ops_.gather_rows(home_total_, h_, home_src_dev_.as<std::int64_t>(), dy, home_send_.data());
  rows_a2av(rail_, home_send_.data(), home_rows_, relay_recv_.data(), relay_rows_, b, true, true);
}

void HierarchicalExchange::combine_backward_finish(void* grad_recv, float* gate_grad,
                                                   LevelBytes& b) {
  finish_rail();
  const std::size_t slots = relay_slot_.size();
  ensure(relay_gate_grad_, slots * sizeof(float));
  ops_.combine_backward(relay_total_, kmax_, h_, relay_slot_dev_.as<std::int64_t>(),
                        relay_gates_dev_.as<float>(), relay_recv_.data(), relay_y_.data(),
                        fan_send_.data(), relay_gate_grad_.as<float>());
  rows_a2av(node_, fan_send_.data(), fan_rows_, fan_recv_.data(), fanin_rows_, b, false);
  ops_.gather_rows(recv_total_, h_, to_flat_dev_.as<std::int64_t>(), fan_recv_.data(), grad_recv);

  // Each copy's gate gradient home along the rail, in the order of its record.
  const std::int64_t sent_records = sum(relay_records_), got_records = sum(home_records_);
  ensure(record_grad_send_, static_cast<std::size_t>(sent_records) * sizeof(float));
  ensure(record_grad_recv_, static_cast<std::size_t>(got_records) * sizeof(float));
  const bool values = !sim::modeled();  // modeled compute moves the bytes, not values
  if (values && sent_records > 0) {
    std::vector<float> at_slot(slots), per_record(static_cast<std::size_t>(sent_records), 0.0f);
    device_.copy_to_host(at_slot.data(), relay_gate_grad_.data(), bytes_of(at_slot));
    for (std::size_t s = 0; s < slots; ++s)
      if (relay_slot_record_[s] >= 0)
        per_record[static_cast<std::size_t>(relay_slot_record_[s])] = at_slot[s];
    device_.copy_from_host(record_grad_send_.data(), per_record.data(), bytes_of(per_record));
  }
  a2av(rail_, record_grad_send_.data(), relay_records_, record_grad_recv_.data(), home_records_, 1,
       DType::fp32, b, true);
  if (values) {
    std::vector<float> got(static_cast<std::size_t>(got_records)),
        per_copy(static_cast<std::size_t>(T_ * k_), 0.0f);
    if (got_records > 0) device_.copy_to_host(got.data(), record_grad_recv_.data(), bytes_of(got));
    for (std::size_t i = 0; i < got.size(); ++i)
      per_copy[static_cast<std::size_t>(home_record_copy_[i])] = got[i];
    device_.copy_from_host(gate_grad, per_copy.data(), bytes_of(per_copy));
  }
}

void HierarchicalExchange::dispatch_backward_start(const void* grad_back, LevelBytes& b) {
  ops_.gather_rows(recv_total_, h_, from_flat_dev_.as<std::int64_t>(), grad_back, fan_recv_.data());
  rows_a2av(node_, fan_recv_.data(), fanin_rows_, fan_send_.data(), fan_rows_, b, false);
  ops_.combine(relay_total_, kmax_, h_, relay_slot_dev_.as<std::int64_t>(), nullptr,
               fan_send_.data(), partial_.data());
  rows_a2av(rail_, partial_.data(), relay_rows_, home_back_.data(), home_rows_, b, true, true);
}

void HierarchicalExchange::dispatch_backward_finish(void* dx, LevelBytes&) {
  finish_rail();
  ops_.combine(T_, M_, h_, home_slot_dev_.as<std::int64_t>(), nullptr, home_back_.data(), dx);
}

}  // namespace suite::moe

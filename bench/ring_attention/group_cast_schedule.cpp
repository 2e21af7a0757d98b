// The group-cast variant's schedule on one rank (ring_attention_impl.hpp, GroupCast): which
// rows travel between which ranks, the messages that carry them, and the forward and backward
// steps around them. The attention itself is the ring's (ring_round, backward_pairs) over the
// plan's pairs, each reading its keys where they arrived.
#include <mpi.h>

#include <algorithm>
#include <numeric>

#include "bench/ring_attention/ring_attention_impl.hpp"
#include "common/harness/errors.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/mpi_env.hpp"

namespace suite::ring {
namespace {

constexpr int kKvTag = Comm::kPeerTagBase;           // K/V rows to the ranks that see them
constexpr int kPartialTag = Comm::kPeerTagBase + 1;  // dK/dV partial sums home

// Asks every rank once which of this rank's rows it needs: `wanted[src]` are the rows this rank
// needs of src; returns, per rank, the rows it needs of this one (set-up metadata, through MPI
// directly: not the step's payload).
std::vector<RowRanges> exchange_wants(MPI_Comm comm, const std::vector<RowRanges>& wanted) {
  const auto n = wanted.size();
  std::vector<int> send_counts(n), recv_counts(n), send_displs(n), recv_displs(n);
  std::vector<std::int64_t> flat;
  for (std::size_t r = 0; r < n; ++r) {
    send_displs[r] = static_cast<int>(flat.size());
    for (const RowRange& x : wanted[r]) {
      flat.push_back(x.first);
      flat.push_back(x.count);
    }
    send_counts[r] = static_cast<int>(flat.size()) - send_displs[r];
  }
  SUITE_MPI_CHECK(
      MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm));
  std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_displs.begin(), 0);
  std::vector<std::int64_t> got(static_cast<std::size_t>(recv_displs.back() + recv_counts.back()));
  SUITE_MPI_CHECK(MPI_Alltoallv(flat.data(), send_counts.data(), send_displs.data(), MPI_INT64_T,
                                got.data(), recv_counts.data(), recv_displs.data(), MPI_INT64_T,
                                comm));
  std::vector<RowRanges> out(n);
  for (std::size_t r = 0; r < n; ++r)
    for (int i = 0; i < recv_counts[r]; i += 2)
      out[r].push_back({got[static_cast<std::size_t>(recv_displs[r] + i)],
                        got[static_cast<std::size_t>(recv_displs[r] + i + 1)]});
  return out;
}

// Where row `row` of a source's block sits among the rows it sends (ranges sorted, disjoint,
// holding it).
std::int64_t packed_index(const RowRanges& ranges, std::int64_t row) {
  std::int64_t before = 0;
  for (const RowRange& r : ranges) {
    if (row < r.first + r.count) return before + (row - r.first);
    before += r.count;
  }
  return before;
}

}  // namespace

void RingAttention::Impl::plan_group_cast() {
  std::vector<RowRanges> wanted(static_cast<std::size_t>(n));
  for (int src = 0; src < n; ++src)
    if (src != rank) wanted[src] = merge_ranges(std::move(gc_reads[static_cast<std::size_t>(src)]));
  gc_reads = {};
  const std::vector<RowRanges> asked = exchange_wants(comm.mpi_comm(), wanted);
  for (int k = 1; k < n; ++k) {
    const int src = ring_source(rank, k, n), dst = (rank + k) % n;
    const RowRanges& from = wanted[static_cast<std::size_t>(src)];
    const RowRanges& to = asked[static_cast<std::size_t>(dst)];
    if (!from.empty()) gc.sources.push_back({src, k, from, rows_in(from), 0, 0});
    if (!to.empty()) gc.targets.push_back({dst, k, to, rows_in(to), 0, 0});
  }
  // The busiest rank's rows against the ring's (n - 1) c.
  std::int64_t received = 0, sent = 0;
  for (const auto& s : gc.sources)
    received += s.count;
  for (const auto& t : gc.targets)
    sent += t.count;
  std::int64_t busiest = std::max(received, sent);
  SUITE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &busiest, 1, MPI_INT64_T, MPI_MAX, comm.mpi_comm()));
  if (group_cast_falls_back(busiest, n, cfg.c)) {
    gc.fallback_note =
        "the busiest rank would move " + std::to_string(busiest) + " rows, as many as the ring's " +
        std::to_string(static_cast<std::int64_t>(n - 1) * cfg.c) + " (" +
        std::string(cfg.docs ? "its queries see every key" : "no --docs: one document") +
        "): the ring's schedule runs";
    gc.sources.clear();
    gc.targets.clear();
    return;
  }
  gc.on = true;
  // Batches of sources whose rows fit one block, each source's [K | V] after the previous
  // one's in its batch's slot.
  std::vector<std::int64_t> rows;
  for (const auto& s : gc.sources)
    rows.push_back(s.count);
  const std::vector<int> batch_of = group_cast_batches(rows, cfg.c);
  std::int64_t filled = 0, largest = 0;
  for (std::size_t i = 0; i < gc.sources.size(); ++i) {
    GroupCast::Peer& s = gc.sources[i];
    s.batch = batch_of[i];
    if (gc.batches.size() <= static_cast<std::size_t>(s.batch))
      gc.batches.emplace_back(), filled = 0;
    s.at = 2 * filled;
    filled += s.count;
    largest = std::max(largest, filled);
    gc.batches.back().push_back(i);
  }
  gc.slot_rows = 2 * largest;
  for (GroupCast::Peer& t : gc.targets) {
    t.at = gc.staged_rows;
    gc.staged_rows += 2 * t.count;
  }
  // Each pair reads its keys where they arrive.
  for (const GroupCast::Peer& s : gc.sources)
    for (PairPlan& pl : plans[static_cast<std::size_t>(s.rank)])
      pl.kv_row = s.at + packed_index(s.rows, pl.ks.local_offset);
}

void RingAttention::Impl::init_group_cast(bool backward) {
  SUITE_CHECK(dev.backend() == Backend::cpu,
              "the group-cast sends host buffers (validate refuses it on cuda)");
  const std::int64_t row = cfg.kv_row(), se = static_cast<std::int64_t>(e);
  auto alloc = [&](std::int64_t elems, std::size_t size) {
    Buffer b = dev.alloc(static_cast<std::size_t>(elems) * size);
    dev.fill_zero(b.data(), b.bytes());  // compute-only steps read slots nothing has filled yet
    return b;
  };
  // Modeled compute reads no values: the messages go out of the own block and the partial sums
  // arrive into one block (placeholders, never read), so that 512 simulated ranks in one
  // process do not map a copy of every row each of them sends (the counts stay the
  // algorithm's).
  const bool copies = !sim::modeled();
  const std::int64_t live = dev.allocation_counters().live;
  gc.staging = alloc(copies ? gc.staged_rows * row : 0, e);
  gc.slot[0] = alloc(gc.slot_rows * row, e);
  gc.slot[1] = alloc(gc.slot_rows * row, e);
  gc.forward_bytes = (gc.staged_rows + 2 * gc.slot_rows) * row * se;
  gc.forward_allocated = dev.allocation_counters().live - live;
  if (!backward) return;
  const std::size_t ge = dtype_size(engine.grad_type()), te = cfg.grad_elem();
  gc.part = alloc(gc.slot_rows * row, ge);
  gc.travel[0] = alloc(gc.slot_rows * row, te);
  gc.travel[1] = alloc(gc.slot_rows * row, te);
  gc.arriving = alloc(copies ? gc.staged_rows * row : cfg.kv_block_elems(), te);
  gc.home = alloc(cfg.kv_block_elems(), te);
  gc.backward_allocated = dev.allocation_counters().live - live - gc.forward_allocated;
  gc.backward_bytes = gc.slot_rows * row * static_cast<std::int64_t>(ge + 2 * te) +
                      gc.staged_rows * row * static_cast<std::int64_t>(te) +
                      cfg.kv_block_elems() * static_cast<std::int64_t>(te);
}

namespace {

// Copies the rows of `ranges` of a block laid out [K (c rows) | V (c rows)] into
// [K rows | V rows] at `dst` (or back, adding, in the backward: see add_home).
void pack_rows(Device& dev, std::byte* dst, const std::byte* block, const RowRanges& ranges,
               std::int64_t c, std::int64_t count, std::int64_t row_bytes) {
  std::int64_t at = 0;
  for (const RowRange& r : ranges) {
    const auto bytes = static_cast<std::size_t>(r.count * row_bytes);
    dev.copy_on_device(dst + at * row_bytes, block + r.first * row_bytes, bytes);
    dev.copy_on_device(dst + (count + at) * row_bytes, block + (c + r.first) * row_bytes, bytes);
    at += r.count;
  }
}

}  // namespace

void RingAttention::Impl::finish_group_cast_sends() {
  for (auto* reqs : {&gc.sends, &gc.partial_sends[0], &gc.partial_sends[1]}) {
    comm.wait_messages(*reqs, -1);
    reqs->clear();
  }
}

void RingAttention::Impl::poll_group_cast() {
  for (auto* reqs : {&gc.receives[0], &gc.receives[1], &gc.sends, &gc.partial_sends[0],
                     &gc.partial_sends[1], &gc.partial_receives})
    comm.test_messages(*reqs);
}

void RingAttention::Impl::post_group_cast_batch(std::size_t b) {
  if (b >= gc.batches.size()) return;
  const std::int64_t row = cfg.kv_row();
  for (std::size_t i : gc.batches[b]) {
    const GroupCast::Peer& s = gc.sources[i];
    gc.receives[b % 2].push_back(comm.post_receive(at(gc.slot[b % 2], s.at * row, e),
                                                   static_cast<std::size_t>(2 * s.count * row),
                                                   cfg.dtype, s.rank, kKvTag));
  }
}

void RingAttention::Impl::start_group_cast(bool backward) {
  // The previous step's messages reached their ranks before those ranks finished their step;
  // their requests complete here, before the staging copy is written again.
  finish_group_cast_sends();
  const std::int64_t row = cfg.kv_row(), row_bytes = row * static_cast<std::int64_t>(e);
  const std::size_t te = cfg.grad_elem();
  for (const GroupCast::Peer& t : gc.targets) {
    std::byte* out = kv_local.as<std::byte>();
    if (!sim::modeled()) {
      out = at(gc.staging, t.at * row, e);
      pack_rows(dev, out, kv_local.as<std::byte>(), t.rows, cfg.c, t.count, row_bytes);
    }
    const auto elems = static_cast<std::size_t>(2 * t.count * row);
    gc.sends.push_back(comm.post_send(out, elems, cfg.dtype, t.rank, kKvTag));
    if (backward)  // the sums of these rows, from the rank they went to
      gc.partial_receives.push_back(
          comm.post_receive(at(gc.arriving, sim::modeled() ? 0 : t.at * row, te), elems,
                            cfg.grad_dtype, t.rank, kPartialTag));
  }
  post_group_cast_batch(0);
  post_group_cast_batch(1);
}

// Waits for batch b's rows (the wait of its first source's round).
void RingAttention::Impl::wait_group_cast_batch(std::size_t b, StepRecord* rec) {
  const GroupCast::Peer& first = gc.sources[gc.batches[b].front()];
  start(rec, Clock::wait, first.round);
  comm.wait_messages(gc.receives[b % 2], first.rank);
  gc.receives[b % 2].clear();
  // The partial sums that left from this batch's travel buffer two batches ago.
  comm.wait_messages(gc.partial_sends[b % 2], -1);
  gc.partial_sends[b % 2].clear();
  stop(rec, Clock::wait, first.round);
}

void RingAttention::Impl::group_cast_forward(Mode mode, StepRecord* rec) {
  using C = Clock;
  const bool moves = mode != Mode::compute_only, computes = mode != Mode::transfer_only;
  if (moves) {
    start(rec, C::wait, 0);
    start_group_cast(false);
    stop(rec, C::wait, 0);
  }
  if (computes) {
    start(rec, C::compute, 0);
    ring_round(rank, kv_local, cfg.c);
    stop(rec, C::compute, 0);
  }
  for (std::size_t b = 0; b < gc.batches.size(); ++b) {
    if (moves) wait_group_cast_batch(b, rec);
    if (computes)
      for (std::size_t i : gc.batches[b]) {
        const GroupCast::Peer& s = gc.sources[i];
        start(rec, C::compute, s.round);
        ring_round(s.rank, gc.slot[b % 2], s.count);
        stop(rec, C::compute, s.round);
      }
    if (moves) post_group_cast_batch(b + 2);
  }
}

void RingAttention::Impl::add_partial_sums(std::byte* dst, const std::byte* src, std::int64_t n) {
  if (grad_t == cfg.grad_dtype) {
    engine.accumulate(dst, cfg.grad_dtype, src, n);
    return;
  }
  if (sim::modeled()) return;  // placeholders: no values to add
  // The engine adds its own type: the arriving sums (host memory) widened first.
  const auto wide = encode(decode(src, static_cast<std::size_t>(n), cfg.grad_dtype), grad_t);
  engine.accumulate(dst, cfg.grad_dtype, wide.data(), n);
}

void RingAttention::Impl::group_cast_backward(Mode mode, StepRecord* rec) {
  using C = Clock;
  const bool moves = mode != Mode::compute_only, computes = mode != Mode::transfer_only;
  const std::int64_t row = cfg.kv_row();
  const std::size_t te = cfg.grad_elem();
  if (moves) {
    start(rec, C::wait, 0);
    start_group_cast(true);
    stop(rec, C::wait, 0);
  }
  if (computes) {  // this rank's own block: its contributions start its total
    start(rec, C::compute, 0);
    begin_backward();
    backward_round(rank, kv_local, part);
    dev.fill_zero(gc.home.data(), gc.home.bytes());
    engine.accumulate(gc.home.data(), cfg.grad_dtype, part.data(), cfg.kv_block_elems());
    stop(rec, C::compute, 0);
  }
  for (std::size_t b = 0; b < gc.batches.size(); ++b) {
    const std::vector<std::size_t>& batch = gc.batches[b];
    if (moves) wait_group_cast_batch(b, rec);
    const Buffer& out = gc.travel[b % 2];
    if (computes) {
      dev.fill_zero(gc.part.data(), gc.part.bytes());
      for (std::size_t i : batch) {
        const GroupCast::Peer& s = gc.sources[i];
        start(rec, C::compute, s.round);
        backward_pairs(s.rank, gc.slot[b % 2], s.count, gc.part);
        stop(rec, C::compute, s.round);
      }
      const int last = gc.sources[batch.back()].round;
      start(rec, C::accumulate, last);  // into the travelling type
      dev.fill_zero(out.data(), out.bytes());
      engine.accumulate(out.data(), cfg.grad_dtype, gc.part.data(), gc.slot_rows * row);
      stop(rec, C::accumulate, last);
    }
    if (moves) {
      for (std::size_t i : batch) {
        const GroupCast::Peer& s = gc.sources[i];
        gc.partial_sends[b % 2].push_back(
            comm.post_send(at(out, s.at * row, te), static_cast<std::size_t>(2 * s.count * row),
                           cfg.grad_dtype, s.rank, kPartialTag));
      }
      post_group_cast_batch(b + 2);
    }
  }
  // The home round: the sums of this rank's rows arrive from the ranks that used them.
  const int home_round = n;
  if (!moves) return;
  start(rec, C::wait, home_round);
  comm.wait_messages(gc.partial_receives, -1);
  gc.partial_receives.clear();
  stop(rec, C::wait, home_round);
  if (!computes || sim::modeled()) return;  // modeled: no values to add
  start(rec, C::accumulate, home_round);
  for (const GroupCast::Peer& t : gc.targets) {
    const std::byte* in = at(gc.arriving, t.at * row, te);
    std::int64_t got = 0;
    for (const RowRange& r : t.rows) {
      const std::int64_t elems = r.count * row;
      add_partial_sums(at(gc.home, r.first * row, te),
                       in + got * row * static_cast<std::int64_t>(te), elems);
      add_partial_sums(at(gc.home, (cfg.c + r.first) * row, te),
                       in + (t.count + got) * row * static_cast<std::int64_t>(te), elems);
      got += r.count;
    }
  }
  stop(rec, C::accumulate, home_round);
}

}  // namespace suite::ring

#include "bench/sp_tp/layer_comm.hpp"

#include <algorithm>

#include "common/sim/sim.hpp"

namespace suite::sp_tp {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::all_reduce:
      return "all_reduce";
    case Coll::reduce_scatter:
      return "reduce_scatter";
    case Coll::all_gather:
      return "all_gather";
    case Coll::ln_grad_all_reduce:
      return "ln_grad_all_reduce";
  }
  return "?";
}

std::int64_t PassComm::activation_bytes() const {
  return sent(Coll::all_reduce) + sent(Coll::reduce_scatter) + sent(Coll::all_gather);
}

int gemm_row_chunks(int t) {
  return 4 * std::max(1, t - 1);
}

std::pair<std::int64_t, std::int64_t> chunk_rows(std::int64_t rows, int chunks, int i) {
  return {rows * i / chunks, rows * (i + 1) / chunks};
}

namespace {
// x mod n in [0, n): the block a ring step holds or the rank next to this one.
int wrap(int x, int n) {
  return (x % n + n) % n;
}
// Row `row` of block b in a buffer of blocks of `rows` rows of row_bytes each.
std::byte* row_at(void* base, int b, std::int64_t row, std::int64_t rows, std::size_t row_bytes) {
  return static_cast<std::byte*>(base) +
         (static_cast<std::size_t>(b) * static_cast<std::size_t>(rows) +
          static_cast<std::size_t>(row)) *
             row_bytes;
}
}  // namespace

void LayerComm::begin_pass(PassComm* sink, std::string comm_phase, std::string compute_phase) {
  sink_ = sink;
  if (sink_) *sink_ = PassComm{};
  comm_phase_ = std::move(comm_phase);
  compute_phase_ = std::move(compute_phase);
}

void LayerComm::gemm(PhaseTimer& ph, const std::function<void()>& f) {
  if (op_.empty())
    ph.time(compute_phase_, f);
  else
    ph.time(op_ + "_gemm", [&] { ph.time(compute_phase_, f); });
}

void LayerComm::waited(PhaseTimer& ph, const std::string& exposed, const std::function<void()>& f) {
  auto comm = [&] { ph.time(comm_phase_, f); };
  auto pass = [&] {
    if (exposed.empty())
      comm();
    else
      ph.time(exposed, comm);
  };
  if (op_.empty())
    pass();
  else
    ph.time(op_ + "_exposed", pass);
}

void LayerComm::record(Coll kind, std::int64_t before) {
  if (!sink_) return;
  const auto k = static_cast<std::size_t>(kind);
  sink_->calls[k] += 1;
  sink_->bytes[k] += comm_.bytes().sent - before;
}

void LayerComm::all_reduce(PhaseTimer& ph, const void* send, void* recv, std::size_t count, DType t,
                           Coll kind) {
  const std::int64_t before = comm_.bytes().sent;
  waited(ph, "", [&] { comm_.all_reduce(send, recv, count, t); });
  record(kind, before);
}

void LayerComm::reduce_scatter(PhaseTimer& ph, const void* send, void* recv, std::size_t recv_count,
                               DType t) {
  const std::int64_t before = comm_.bytes().sent;
  waited(ph, "", [&] { comm_.reduce_scatter(send, recv, recv_count, t); });
  record(Coll::reduce_scatter, before);
}

void LayerComm::all_gather(PhaseTimer& ph, const void* send, void* recv, std::size_t send_count,
                           DType t) {
  const std::int64_t before = comm_.bytes().sent;
  waited(ph, "", [&] { comm_.all_gather(send, recv, send_count, t); });
  record(Coll::all_gather, before);
}

void LayerComm::all_gather_with(
    PhaseTimer& ph, const void* send, void* recv, std::size_t send_count, DType t, bool overlapped,
    int chunks, const std::string& exposed_phase,
    const std::function<void(int, const std::function<void()>&)>& compute) {
  const int n = comm_.size(), r = comm_.rank();
  const std::int64_t before = comm_.bytes().sent;
  const std::function<void()> no_progress = [] {};
  if (!overlapped || n == 1) {
    waited(ph, exposed_phase, [&] { comm_.all_gather(send, recv, send_count, t); });
    record(Coll::all_gather, before);
    for (int i = 0; i < chunks; ++i)
      gemm(ph, [&] { compute(i, no_progress); });
    return;
  }
  // Ring: step k sends block (r - k) mod n to rank r + 1 and receives block (r - k - 1) mod n
  // from rank r - 1; block r is this rank's own (copied in place on the device's stream).
  const std::size_t block = send_count * dtype_size(t);
  auto at = [&](int b) {
    return static_cast<std::byte*>(recv) + static_cast<std::size_t>(b) * block;
  };
  device_.copy_on_device(at(r), send, block);
  const std::function<void()> poll = [this] { comm_.progress(); };
  int next = 0;
  for (int k = 0; k < n - 1; ++k) {
    const int send_block = wrap(r - k, n), recv_block = wrap(r - k - 1, n);
    const void* src = k == 0 ? send : at(send_block);
    waited(ph, exposed_phase, [&] {
      comm_.start_exchange(src, wrap(r + 1, n), at(recv_block), wrap(r - 1, n), send_count, t);
    });
    // This step's share of the chunks (the last step takes the remainder).
    const int until = k == n - 2 ? chunks : chunks * (k + 1) / (n - 1);
    for (; next < until; ++next)
      gemm(ph, [&] { compute(next, poll); });
    waited(ph, exposed_phase, [&] { comm_.finish_exchange(); });
  }
  record(Coll::all_gather, before);
}

int LayerComm::poll_chunks() const {
  return device_.backend() == Backend::cpu && !sim::modeled() ? 4 : 1;
}

void LayerComm::block_gemm(PhaseTimer& ph, int block, std::int64_t rows, const RowsGemm& f) {
  const int m =
      static_cast<int>(std::min<std::int64_t>(poll_chunks(), std::max<std::int64_t>(1, rows)));
  for (int i = 0; i < m; ++i) {
    const auto [r0, r1] = chunk_rows(rows, m, i);
    if (r1 > r0) gemm(ph, [&] { f(block, r0, r1 - r0); });
    if (i + 1 < m) comm_.progress();
  }
}

void LayerComm::all_gather_matmul(PhaseTimer& ph, const void* send, void* recv, std::int64_t rows,
                                  std::int64_t row_elems, DType t, const TpOverlapMode& mode,
                                  const std::string& exposed_phase, const RowsGemm& rows_gemm) {
  if (mode.kind == TpOverlap::chunks)
    pieces_all_gather_matmul(ph, send, recv, rows, row_elems, t, mode.chunks, exposed_phase,
                             rows_gemm);
  else
    ring_all_gather_matmul(ph, send, recv, rows, row_elems, t, exposed_phase, rows_gemm);
}

void LayerComm::matmul_reduce_scatter(PhaseTimer& ph, void* blocks, void* in, void* recv,
                                      std::int64_t rows, std::int64_t row_elems, DType t,
                                      const TpOverlapMode& mode, const std::string& exposed_phase,
                                      const RowsPartial& partial, const Add& add) {
  if (mode.kind == TpOverlap::chunks)
    pieces_matmul_reduce_scatter(ph, blocks, in, recv, rows, row_elems, t, mode.chunks,
                                 exposed_phase, partial, add);
  else
    ring_matmul_reduce_scatter(ph, blocks, in, recv, rows, row_elems, t, exposed_phase, partial,
                               add);
}

void LayerComm::ring_all_gather_matmul(PhaseTimer& ph, const void* send, void* recv,
                                       std::int64_t rows, std::int64_t row_elems, DType t,
                                       const std::string& exposed_phase,
                                       const RowsGemm& rows_gemm) {
  const int n = comm_.size(), r = comm_.rank();
  const std::int64_t before = comm_.bytes().sent;
  const auto send_count = static_cast<std::size_t>(rows * row_elems);
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * dtype_size(t);
  auto at = [&](int b) { return row_at(recv, b, 0, rows, row_bytes); };
  device_.copy_on_device(at(r), send, send_count * dtype_size(t));
  // Step k: block (r - k) mod n is here (this rank's own at k = 0); it goes on to rank r + 1
  // while its GEMM runs, and block (r - k - 1) mod n arrives from rank r - 1 for the next step.
  for (int k = 0; k < n; ++k) {
    const int here = wrap(r - k, n), next = wrap(r - k - 1, n);
    const bool more = k < n - 1;
    if (more)
      waited(ph, exposed_phase, [&] {
        comm_.start_exchange(at(here), wrap(r + 1, n), at(next), wrap(r - 1, n), send_count, t);
      });
    block_gemm(ph, here, rows, rows_gemm);
    if (more) waited(ph, exposed_phase, [&] { comm_.finish_exchange(); });
  }
  record(Coll::all_gather, before);
}

void LayerComm::ring_matmul_reduce_scatter(PhaseTimer& ph, void* blocks, void* in, void* recv,
                                           std::int64_t rows, std::int64_t row_elems, DType t,
                                           const std::string& exposed_phase,
                                           const RowsPartial& partial, const Add& add) {
  const int n = comm_.size(), r = comm_.rank();
  const std::int64_t before = comm_.bytes().sent;
  const auto recv_count = static_cast<std::size_t>(rows * row_elems);
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * dtype_size(t);
  auto at = [&](int b) { return row_at(blocks, b, 0, rows, row_bytes); };
  auto make = [&](int b) {  // block b's partial products, into its place
    block_gemm(ph, b, rows, [&](int j, std::int64_t r0, std::int64_t count) {
      partial(j, r0, count, row_at(blocks, j, r0, rows, row_bytes));
    });
  };
  auto chunk = [&](int k) { return wrap(r - k - 1, n); };  // block of step k
  make(chunk(0));
  for (int k = 1; k < n; ++k) {
    // The sum so far of step k-1's block goes to r + 1; r - 1's sum of this step's block comes.
    waited(ph, exposed_phase, [&] {
      comm_.start_exchange(at(chunk(k - 1)), wrap(r + 1, n), in, wrap(r - 1, n), recv_count, t);
    });
    make(chunk(k));
    waited(ph, exposed_phase, [&] { comm_.finish_exchange(); });
    ph.time(compute_phase_,
            [&] { add(at(chunk(k)), in, k == n - 1 ? recv : at(chunk(k)), rows * row_elems); });
  }
  if (n == 1) device_.copy_on_device(recv, at(0), recv_count * dtype_size(t));
  record(Coll::reduce_scatter, before);
}

namespace {
// Blocks [t b / (t-1), t (b+1) / (t-1)) of t: share b of t block GEMMs spread over t-1 steps.
std::pair<int, int> share_of(int blocks, int steps, int b) {
  return {blocks * b / steps, blocks * (b + 1) / steps};
}
}  // namespace

void LayerComm::pieces_all_gather_matmul(PhaseTimer& ph, const void* send, void* recv,
                                         std::int64_t rows, std::int64_t row_elems, DType t,
                                         int pieces, const std::string& exposed_phase,
                                         const RowsGemm& rows_gemm) {
  const int n = comm_.size(), r = comm_.rank();
  const std::int64_t before = comm_.bytes().sent;
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * dtype_size(t);
  auto at = [&](int b, std::int64_t row) { return row_at(recv, b, row, rows, row_bytes); };
  device_.copy_on_device(at(r, 0), send, static_cast<std::size_t>(rows) * row_bytes);
  // Step k of piece p's ring: piece p of block (r - k) mod n goes to r + 1, piece p of block
  // (r - k - 1) mod n comes from r - 1.
  auto start = [&](int p, int k) {
    const auto [r0, r1] = chunk_rows(rows, pieces, p);
    const int out = wrap(r - k, n), in = wrap(r - k - 1, n);
    waited(ph, exposed_phase, [&] {
      comm_.start_exchange(at(out, r0), wrap(r + 1, n), at(in, r0), wrap(r - 1, n),
                           static_cast<std::size_t>((r1 - r0) * row_elems), t);
    });
  };
  auto finish = [&] { waited(ph, exposed_phase, [&] { comm_.finish_exchange(); }); };
  auto piece_gemm = [&](int p, int j) {  // piece p of block j
    const auto [r0, r1] = chunk_rows(rows, pieces, p);
    gemm(ph, [&] { rows_gemm(j, r0, r1 - r0); });
  };
  for (int k = 0; k < n - 1; ++k) {
    start(0, k);
    finish();
  }
  for (int p = 0; p < pieces; ++p) {
    if (p + 1 == pieces || n == 1) {
      for (int j = 0; j < n; ++j)
        piece_gemm(p, j);
      continue;
    }
    for (int k = 0; k < n - 1; ++k) {
      start(p + 1, k);
      const auto [j0, j1] = share_of(n, n - 1, k);
      for (int j = j0; j < j1; ++j) {
        piece_gemm(p, j);
        comm_.progress();
      }
      finish();
    }
  }
  record(Coll::all_gather, before);
}

void LayerComm::pieces_matmul_reduce_scatter(PhaseTimer& ph, void* blocks, void* in, void* recv,
                                             std::int64_t rows, std::int64_t row_elems, DType t,
                                             int pieces, const std::string& exposed_phase,
                                             const RowsPartial& partial, const Add& add) {
  const int n = comm_.size(), r = comm_.rank();
  const std::int64_t before = comm_.bytes().sent;
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * dtype_size(t);
  auto at = [&](void* base, int b, std::int64_t row) {
    return row_at(base, b, row, rows, row_bytes);
  };
  auto make = [&](int p, int j) {  // piece p of block j's partial products, into its place
    const auto [r0, r1] = chunk_rows(rows, pieces, p);
    gemm(ph, [&] { partial(j, r0, r1 - r0, at(blocks, j, r0)); });
  };
  auto chunk = [&](int k) { return wrap(r - k - 1, n); };  // block of step k
  for (int j = 0; j < n; ++j)
    make(0, j);
  for (int p = 0; p < pieces; ++p) {
    const auto [r0, r1] = chunk_rows(rows, pieces, p);
    const std::int64_t elems = (r1 - r0) * row_elems;
    const bool next = p + 1 < pieces;
    // Step k: the sum so far of block chunk(k-1)'s piece goes to r + 1, r - 1's sum of block
    // chunk(k)'s piece arrives into `in`; the last step's block is this rank's, summed into recv.
    for (int k = 1; k < n; ++k) {
      waited(ph, exposed_phase, [&] {
        comm_.start_exchange(at(blocks, chunk(k - 1), r0), wrap(r + 1, n), in, wrap(r - 1, n),
                             static_cast<std::size_t>(elems), t);
      });
      if (next) {
        const auto [j0, j1] = share_of(n, n - 1, k - 1);
        for (int j = j0; j < j1; ++j) {
          make(p + 1, j);
          comm_.progress();
        }
      }
      waited(ph, exposed_phase, [&] { comm_.finish_exchange(); });
      ph.time(compute_phase_, [&] {
        add(at(blocks, chunk(k), r0), in, k == n - 1 ? at(recv, 0, r0) : at(blocks, chunk(k), r0),
            elems);
      });
    }
    if (n == 1) {
      device_.copy_on_device(at(recv, 0, r0), at(blocks, 0, r0),
                             static_cast<std::size_t>(r1 - r0) * row_bytes);
      if (next) make(p + 1, 0);
    }
  }
  record(Coll::reduce_scatter, before);
}

std::vector<Comm::ExchangeTiming> LayerComm::take_exchanges() {
  std::vector<Comm::ExchangeTiming> out = comm_.exchange_log();
  comm_.clear_exchange_log();
  return out;
}

}  // namespace suite::sp_tp

// The layer's collectives, counted per pass (calls of each kind and the bytes this rank sent,
// as the transport's Comm::bytes() counts them) and timed as the pass's comm phase. The
// LayerNorm-output all-gather of the TP+SP backward can run overlapped with the input-gradient
// GEMM: a ring of t-1 exchanges (Comm::start_exchange: NCCL on its communication stream, MPI
// nonblocking and progressed between GEMM chunks), each waited for after its share of the GEMM;
// the wait is the exposed communication.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/sp_tp/layer_config.hpp"
#include "common/harness/phase_timer.hpp"
#include "common/transport/comm.hpp"

namespace suite::sp_tp {

enum class Coll { all_reduce, reduce_scatter, all_gather, ln_grad_all_reduce };
constexpr std::array<Coll, 4> kColls = {Coll::all_reduce, Coll::reduce_scatter, Coll::all_gather,
                                        Coll::ln_grad_all_reduce};
const char* coll_name(Coll c);

// One pass's collectives: calls per kind and bytes sent per kind (Comm::bytes()).
struct PassComm {
  std::array<int, 4> calls{};
  std::array<std::int64_t, 4> bytes{};
  int count(Coll c) const { return calls[static_cast<std::size_t>(c)]; }
  std::int64_t sent(Coll c) const { return bytes[static_cast<std::size_t>(c)]; }
  // The activation-sized collectives (METHODS.md's n = sbh e): all but the LayerNorm grads.
  std::int64_t activation_bytes() const;
};

// Row chunks of the input-gradient GEMMs of the column-parallel layers: the same in every
// variant and overlap setting (so TP, TP+SP, overlapped or not, compute the same numbers),
// enough for the t-1 exchanges of the ring all-gather to each overlap some of them.
int gemm_row_chunks(int t);
// Rows [begin, end) of chunk i of `chunks` over `rows`.
std::pair<std::int64_t, std::int64_t> chunk_rows(std::int64_t rows, int chunks, int i);

class LayerComm {
 public:
  LayerComm(Comm& comm, Device& device) : comm_(comm), device_(device) {}

  MPI_Comm mpi_comm() const { return comm_.mpi_comm(); }
  int size() const { return comm_.size(); }
  int rank() const { return comm_.rank(); }
  Device& device() { return device_; }

  // Starts counting a new pass; the phase names of its comm and compute time.
  void begin_pass(PassComm* sink, std::string comm_phase, std::string compute_phase);
  // The op whose collectives and GEMMs run next (METHODS.md 1.1: qkv, out_proj, fc1, fc2, with
  // the pass's prefix, e.g. "fwd_qkv"); "" for none. Communication this rank waits for inside it
  // (a blocking collective, a ring's waits) is also timed as phase <op>_exposed, its GEMMs as
  // <op>_gemm: per op, the transfer a blocking layer pays, what a ring left exposed, and the
  // compute that hid it.
  void set_op(std::string op) { op_ = std::move(op); }
  // f, a GEMM of the current op: timed as the pass's compute and as <op>_gemm.
  void gemm(PhaseTimer& ph, const std::function<void()>& f);

  void all_reduce(PhaseTimer& ph, const void* send, void* recv, std::size_t count, DType t,
                  Coll kind = Coll::all_reduce);
  void reduce_scatter(PhaseTimer& ph, const void* send, void* recv, std::size_t recv_count,
                      DType t);
  void all_gather(PhaseTimer& ph, const void* send, void* recv, std::size_t send_count, DType t);
  // recv = all_gather(send), while compute(i) runs for i = 0 .. chunks-1 (as the pass's compute
  // phase; progress() polls the transport). overlapped = false: the blocking all-gather first.
  // The exposed part of the all-gather (blocking call, or the waits of the ring) is also timed
  // as phase `exposed_phase`.
  void all_gather_with(
      PhaseTimer& ph, const void* send, void* recv, std::size_t send_count, DType t,
      bool overlapped, int chunks, const std::string& exposed_phase,
      const std::function<void(int chunk, const std::function<void()>& progress)>& compute);
  // A GEMM over rows [r0, r0 + rows) of block `block` (block j: rank j's rows).
  using RowsGemm = std::function<void(int block, std::int64_t r0, std::int64_t rows)>;
  // The same, writing its partial products to out (where those rows go in the blocks).
  using RowsPartial = std::function<void(int block, std::int64_t r0, std::int64_t rows, void* out)>;
  // out = a + b over `elems` elements.
  using Add = std::function<void(const void* a, const void* b, void* out, std::int64_t elems)>;
  // Collective matmul (METHODS.md 1.1): recv = all_gather(send), t blocks of `rows` rows of
  // `row_elems` elements, beside the GEMM that reads them. Counted as one all-gather.
  //  - ring: t-1 exchanges, rows_gemm running on each block of recv as soon as it is there (its
  //    own block first, while that travels to rank + 1), in poll_chunks() pieces with the
  //    transport polled between them;
  //  - chunks:K: K pieces of every block's rows (chunk_rows(rows, K, p)), each piece's
  //    all-gather a ring of t-1 exchanges, the GEMM of piece p over every block spread over
  //    piece p+1's exchanges; piece 0's all-gather and the last piece's GEMM have nothing
  //    beside them.
  void all_gather_matmul(PhaseTimer& ph, const void* send, void* recv, std::int64_t rows,
                         std::int64_t row_elems, DType t, const TpOverlapMode& mode,
                         const std::string& exposed_phase, const RowsGemm& rows_gemm);
  // recv = the reduce-scatter of the t blocks of partial products `partial` makes into
  // `blocks` (t blocks of `rows` rows; the last one summed is this rank's, into recv); `in`
  // holds one incoming block; add sums. Counted as one reduce-scatter.
  //  - ring: step k makes block (rank - k - 1) mod t while the sum so far of the previous block
  //    travels to rank + 1 and that of this one arrives from rank - 1;
  //  - chunks:K: piece by piece, piece p's reduce-scatter (a ring of t-1 exchanges) running
  //    while piece p+1's partial products compute; piece 0's GEMM and the last piece's
  //    reduce-scatter have nothing beside them.
  void matmul_reduce_scatter(PhaseTimer& ph, void* blocks, void* in, void* recv, std::int64_t rows,
                             std::int64_t row_elems, DType t, const TpOverlapMode& mode,
                             const std::string& exposed_phase, const RowsPartial& partial,
                             const Add& add);
  // The ring exchanges since the last call (the overlapped all-gathers): seconds from start to
  // completion, and whether completion was seen while the GEMM still ran; clears the log.
  std::vector<Comm::ExchangeTiming> take_exchanges();

 private:
  void record(Coll kind, std::int64_t before);
  // Row pieces of a block's GEMM between polls of the transport: 4 on the CPU backend (MPI
  // moves data only inside its calls, so a GEMM in one piece would leave the block waiting),
  // 1 elsewhere (NCCL progresses on its own stream; modeled compute has nothing to poll for).
  int poll_chunks() const;
  void block_gemm(PhaseTimer& ph, int block, std::int64_t rows, const RowsGemm& f);
  void ring_all_gather_matmul(PhaseTimer& ph, const void* send, void* recv, std::int64_t rows,
                              std::int64_t row_elems, DType t, const std::string& exposed_phase,
                              const RowsGemm& rows_gemm);
  void pieces_all_gather_matmul(PhaseTimer& ph, const void* send, void* recv, std::int64_t rows,
                                std::int64_t row_elems, DType t, int pieces,
                                const std::string& exposed_phase, const RowsGemm& rows_gemm);
  void ring_matmul_reduce_scatter(PhaseTimer& ph, void* blocks, void* in, void* recv,
                                  std::int64_t rows, std::int64_t row_elems, DType t,
                                  const std::string& exposed_phase, const RowsPartial& partial,
                                  const Add& add);
  void pieces_matmul_reduce_scatter(PhaseTimer& ph, void* blocks, void* in, void* recv,
                                    std::int64_t rows, std::int64_t row_elems, DType t, int pieces,
                                    const std::string& exposed_phase, const RowsPartial& partial,
                                    const Add& add);
  // f, communication this rank waits for: the pass's comm phase, `exposed` (unless empty) and
  // the current op's <op>_exposed.
  void waited(PhaseTimer& ph, const std::string& exposed, const std::function<void()>& f);
  Comm& comm_;
  Device& device_;
  PassComm* sink_ = nullptr;
  std::string comm_phase_ = "comm", compute_phase_ = "compute", op_;
};

}  // namespace suite::sp_tp

// MPI transport. On the CPU backend buffers are host memory and go straight to MPI. On CUDA
// they are device memory: passed directly when the library is CUDA-aware, otherwise copied
// through a pinned host staging area (recorded as "host-staged"). bf16 reductions always
// stage, because MPI has no bf16 type and a user-defined op runs on the host.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "common/harness/errors.hpp"
#include "common/harness/run_clock.hpp"
#include "common/sim/sim.hpp"
#include "common/transport/comm.hpp"
#include "common/transport/mpi_compat.hpp"
#include "kernels/core/bf16.hpp"

namespace suite {
namespace {

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const bf16*>(in);
  auto* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::fp32:
      return MPI_FLOAT;
    case DType::fp64:
      return MPI_DOUBLE;
    case DType::bf16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

int as_int(std::size_t n) {
  SUITE_CHECK(n <= static_cast<std::size_t>(INT32_MAX), "MPI count above 2^31-1 elements");
  return static_cast<int>(n);
}

class MpiComm final : public Comm {
 public:
  MpiComm(Device& device, MPI_Comm comm) : Comm(comm), device_(device) {
    on_device_ = device.backend() == Backend::cuda;
    cuda_aware_ = on_device_ && mpi_library_cuda_aware();
    SUITE_MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_sum_op_));
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Op_free(&bf16_sum_op_);
  }

  Transport transport() const override { return Transport::mpi; }
  std::size_t max_count() const override { return INT32_MAX; }
  std::string detail() const override {
    if (!on_device_) return "host buffers";
    return cuda_aware_ ? "cuda-aware" : "host-staged";
  }

  void all_reduce(const void* send, void* recv, std::size_t count, DType t) override {
    std::size_t n = count * dtype_size(t);
    if (placeholder_ring(n) && count % static_cast<std::size_t>(size_) == 0) {
      WaitScope wait(*this, "all-reduce");
      const std::size_t block = n / static_cast<std::size_t>(size_);
      ring_reduce_scatter(send, static_cast<std::byte*>(recv) + block * rank_, block);
      ring_all_gather(recv, block);
      count_both(all_reduce_bytes(static_cast<std::int64_t>(n)));
      return;
    }
    Staged s = stage(send, n, recv, n, t, true);
    WaitScope wait(*this, "all-reduce");
    SUITE_MPI_CHECK(MPI_Allreduce(s.send, s.recv, as_int(count), mpi_type(t), sum_op(t), comm_));
    unstage(s, recv, n);
    count_both(all_reduce_bytes(static_cast<std::int64_t>(n)));
  }

  void start_all_reduce(const void* send, void* recv, std::size_t count, DType t) override {
    const std::size_t n = count * dtype_size(t);
    if (!nonblocking_sum(n, t)) return all_reduce(send, recv, count, t);
    if (on_device_) device_.synchronize();  // the kernels that produced `send` are done
    MPI_Request req = MPI_REQUEST_NULL;
    SUITE_MPI_CHECK(MPI_Iallreduce(send, recv, as_int(count), mpi_type(t), sum_op(t), comm_, &req));
    pending_sums_.push_back(req);
    count_both(all_reduce_bytes(static_cast<std::int64_t>(n)));
  }

  void finish_all_reduces() override {
    if (pending_sums_.empty()) return;
    WaitScope wait(*this, "all-reduce (started earlier)");
    SUITE_MPI_CHECK(MPI_Waitall(static_cast<int>(pending_sums_.size()), pending_sums_.data(),
                                MPI_STATUSES_IGNORE));
    pending_sums_.clear();
  }

  std::string async_all_reduce(DType t) const override {
    if (sim::modeled()) return "blocking (modeled compute: placeholders)";
    if (on_device_ && !cuda_aware_) return "blocking (host-staged buffers)";
    if (on_device_ && t == DType::bf16) return "blocking (bf16 sums on the host)";
    return "nonblocking";
  }

  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t) override {
    std::size_t n = recv_count * dtype_size(t);
    if (placeholder_ring(n * size_)) {
      WaitScope wait(*this, "reduce-scatter");
      ring_reduce_scatter(send, recv, n);
      count_both(static_cast<std::int64_t>(n) * (size_ - 1));
      return;
    }
    Staged s = stage(send, n * size_, recv, n, t, true);
    WaitScope wait(*this, "reduce-scatter");
    SUITE_MPI_CHECK(MPI_Reduce_scatter_block(s.send, s.recv, as_int(recv_count), mpi_type(t),
                                             sum_op(t), comm_));
    unstage(s, recv, n);
    count_both(static_cast<std::int64_t>(n) * (size_ - 1));
  }

  void all_gather(const void* send, void* recv, std::size_t send_count, DType t) override {
    std::size_t n = send_count * dtype_size(t);
    if (placeholder_ring(n * size_)) {
      WaitScope wait(*this, "all-gather");
      device_.copy_on_device(static_cast<std::byte*>(recv) + n * rank_, send, n);
      ring_all_gather(recv, n);
      count_both(static_cast<std::int64_t>(n) * (size_ - 1));
      return;
    }
    Staged s = stage(send, n, recv, n * size_, t, false);
    WaitScope wait(*this, "all-gather");
    SUITE_MPI_CHECK(MPI_Allgather(s.send, as_int(send_count), mpi_type(t), s.recv,
                                  as_int(send_count), mpi_type(t), comm_));
    unstage(s, recv, n * size_);
    count_both(static_cast<std::int64_t>(n) * (size_ - 1));
  }

  void all_to_all(const void* send, void* recv, std::size_t count_per_rank, DType t) override {
    std::size_t n = count_per_rank * dtype_size(t);
    Staged s = stage(send, n * size_, recv, n * size_, t, false);
    WaitScope wait(*this, "all-to-all");
    SUITE_MPI_CHECK(MPI_Alltoall(s.send, as_int(count_per_rank), mpi_type(t), s.recv,
                                 as_int(count_per_rank), mpi_type(t), comm_));
    unstage(s, recv, n * size_);
    count_both(static_cast<std::int64_t>(n) * (size_ - 1));
  }

  void all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                    const std::vector<std::size_t>& send_displs, void* recv,
                    const std::vector<std::size_t>& recv_counts,
                    const std::vector<std::size_t>& recv_displs, DType t) override {
    VCounts v = v_counts(send_counts, send_displs, recv_counts, recv_displs, t);
    const std::int64_t e = static_cast<std::int64_t>(dtype_size(t));
    Staged s = stage(send, v.send_extent * e, recv, v.recv_extent * e, t, false);
    WaitScope wait(*this, "all-to-all-v");
    SUITE_MPI_CHECK(MPI_Alltoallv(s.send, v.sc.data(), v.sd.data(), mpi_type(t), s.recv,
                                  v.rc.data(), v.rd.data(), mpi_type(t), comm_));
    unstage(s, recv, v.recv_extent * e);
    count(v.sent, v.got);
  }

  int start_all_to_all_v(const void* send, const std::vector<std::size_t>& send_counts,
                         const std::vector<std::size_t>& send_displs, void* recv,
                         const std::vector<std::size_t>& recv_counts,
                         const std::vector<std::size_t>& recv_displs, DType t) override {
    if (on_device_)  // staged or device buffers: blocking, as the interface says
      return Comm::start_all_to_all_v(send, send_counts, send_displs, recv, recv_counts,
                                      recv_displs, t);
    PendingV p{v_counts(send_counts, send_displs, recv_counts, recv_displs, t), MPI_REQUEST_NULL};
    // The count arrays must outlive the request: they move with it (their storage stays put).
    SUITE_MPI_CHECK(MPI_Ialltoallv(send, p.v.sc.data(), p.v.sd.data(), mpi_type(t), recv,
                                   p.v.rc.data(), p.v.rd.data(), mpi_type(t), comm_, &p.request));
    count(p.v.sent, p.v.got);
    pending_v_.push_back(std::move(p));
    return next_ticket_++;
  }

  bool nonblocking_all_to_all_v() const override { return !on_device_; }
  std::string all_to_all_v_overlap() const override {
    return on_device_ ? Comm::all_to_all_v_overlap() : "nonblocking all-to-all-v (MPI_Ialltoallv)";
  }

  void finish_all_to_all_v(int ticket) override {
    if (ticket < 0) return;
    const std::size_t i =
        static_cast<std::size_t>(ticket - (next_ticket_ - static_cast<int>(pending_v_.size())));
    SUITE_CHECK(i < pending_v_.size(), "finish_all_to_all_v of a ticket not in flight");
    {
      WaitScope wait(*this, "all-to-all-v (started earlier)");
      SUITE_MPI_CHECK(MPI_Wait(&pending_v_[i].request, MPI_STATUS_IGNORE));
    }
    // Finished ones leave from the front, so tickets map to positions.
    while (!pending_v_.empty() && pending_v_.front().request == MPI_REQUEST_NULL)
      pending_v_.erase(pending_v_.begin());
  }

  using Comm::start_exchange;
  void start_exchange(const std::vector<ExchangePart>& parts, int to, int from) override {
    SUITE_CHECK(!exchange_.active, "start_exchange while another exchange is in flight");
    exchange_.t0 = Clock::now();  // the staging copies belong to the exchange's duration
    exchange_.active = true;
    exchange_.done = false;
    exchange_.done_in_progress = false;
    exchange_.parts.clear();
    exchange_.requests.clear();
    exchange_.from = from;
    std::size_t staged_offset = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const ExchangePart& part = parts[i];
      const std::size_t n = part.count * dtype_size(part.type);
      Exchange::Part mine{stage_exchange(part.send, part.recv, n, staged_offset, parts), part.recv,
                          n};
      staged_offset += 2 * n;
      const int tag = kRingTag + static_cast<int>(i);  // parts pair up by order and tag
      exchange_.requests.emplace_back();
      SUITE_MPI_CHECK(MPI_Irecv(mine.staged.recv, as_int(part.count), mpi_type(part.type), from,
                                tag, comm_, &exchange_.requests.back()));
      exchange_.requests.emplace_back();
      SUITE_MPI_CHECK(MPI_Isend(mine.staged.send, as_int(part.count), mpi_type(part.type), to, tag,
                                comm_, &exchange_.requests.back()));
      exchange_.parts.push_back(mine);
      count(to == rank_ ? 0 : static_cast<std::int64_t>(n),
            from == rank_ ? 0 : static_cast<std::int64_t>(n));
    }
  }
  void progress() override {
    // Under modeled compute SMPI moves the messages in simulated time without the ranks'
    // calls, and SimGrid 3.32 leaves each request a test completes on its rank's activity
    // list, which every later completion walks: polling made large simulations quadratic.
    if (sim::modeled()) return;
    if (!pending_sums_.empty()) {  // lets the started sums move as well
      int done = 0;
      SUITE_MPI_CHECK(MPI_Testall(static_cast<int>(pending_sums_.size()), pending_sums_.data(),
                                  &done, MPI_STATUSES_IGNORE));
    }
    if (!exchange_.active || exchange_.done) return;
    int flag = 0;
    SUITE_MPI_CHECK(MPI_Testall(static_cast<int>(exchange_.requests.size()),
                                exchange_.requests.data(), &flag, MPI_STATUSES_IGNORE));
    if (flag) mark_done(true);
  }

  void finish_exchange() override {
    SUITE_CHECK(exchange_.active, "finish_exchange without start_exchange");
    if (!exchange_.done) {
      WaitScope wait(*this, "ring exchange", exchange_.from);
      SUITE_MPI_CHECK(MPI_Waitall(static_cast<int>(exchange_.requests.size()),
                                  exchange_.requests.data(), MPI_STATUSES_IGNORE));
      mark_done(false);
    }
    // Into a buffer that only the work queued before start_exchange read: the copy waits for
    // that work (mark_queued_work), not for the attention queued since.
    bool staged = false;
    for (const Exchange::Part& part : exchange_.parts) {
      if (!part.staged.staged) continue;
      device_.copy_from_host_concurrent(part.recv_dst, part.staged.recv, part.bytes);
      staged = true;
    }
    if (staged) exchange_.t_done = Clock::now();
    exchange_.active = false;
    log_.push_back({std::chrono::duration<double>(exchange_.t_done - exchange_.t0).count(),
                    exchange_.done_in_progress});
  }

  std::vector<ExchangeTiming> exchange_log() override { return log_; }
  void clear_exchange_log() override { log_.clear(); }

  std::string overlap_mechanism() const override {
    if (!on_device_) return "mpi nonblocking, progressed by MPI_Testall between attention tiles";
    return cuda_aware_ ? "mpi nonblocking on device buffers while the GPU computes"
                       : "mpi nonblocking through pinned host buffers while the GPU computes";
  }

  void barrier() override {
    WaitScope wait(*this, "barrier");
    SUITE_MPI_CHECK(MPI_Barrier(comm_));
  }

 private:
  // Modeled compute (SMPI build, --sim-flops): tensors of a MiB and more are placeholders that
  // hold no values, but SMPI's own collective algorithms allocate and reduce into real
  // temporaries of the message's size, on every simulated rank at once (a 1024-rank mesh's
  // TP reduce-scatters alone would need hundreds of GB). These collectives then run as rings of
  // point-to-point messages between the placeholders (NCCL's ring: t-1 steps of one block to
  // rank+1), which SMPI moves without touching memory; the reductions are skipped, as modeled
  // compute skips every kernel, and the bytes counted are the same.
  // Nonblocking where MPI takes the buffers as they are: host memory, or CUDA-aware but for bf16
  // (its sum runs on the host), and no placeholders (SMPI's nonblocking sum copies its buffers
  // into real temporaries).
  // An all-to-all-v's int counts and displacements, and the bytes it moves to other ranks.
  struct VCounts {
    std::vector<int> sc, sd, rc, rd;
    std::size_t send_extent = 0, recv_extent = 0;
    std::int64_t sent = 0, got = 0;
  };
  struct PendingV {
    VCounts v;
    MPI_Request request;
  };
  VCounts v_counts(const std::vector<std::size_t>& send_counts,
                   const std::vector<std::size_t>& send_displs,
                   const std::vector<std::size_t>& recv_counts,
                   const std::vector<std::size_t>& recv_displs, DType t) const {
    SUITE_CHECK(send_counts.size() == static_cast<std::size_t>(size_) &&
                    send_displs.size() == send_counts.size() &&
                    recv_counts.size() == send_counts.size() &&
                    recv_displs.size() == send_counts.size(),
                "all_to_all_v needs one count and displacement per rank");
    VCounts v{std::vector<int>(size_), std::vector<int>(size_), std::vector<int>(size_),
              std::vector<int>(size_)};
    const std::int64_t e = static_cast<std::int64_t>(dtype_size(t));
    for (int r = 0; r < size_; ++r) {
      v.sc[r] = as_int(send_counts[r]);
      v.sd[r] = as_int(send_displs[r]);
      v.rc[r] = as_int(recv_counts[r]);
      v.rd[r] = as_int(recv_displs[r]);
      v.send_extent = std::max(v.send_extent, send_displs[r] + send_counts[r]);
      v.recv_extent = std::max(v.recv_extent, recv_displs[r] + recv_counts[r]);
      if (r != rank_) {
        v.sent += static_cast<std::int64_t>(send_counts[r]) * e;
        v.got += static_cast<std::int64_t>(recv_counts[r]) * e;
      }
    }
    return v;
  }

  bool nonblocking_sum(std::size_t bytes, DType t) const {
    const bool as_they_are = !on_device_ || (cuda_aware_ && t != DType::bf16);  // as stage()
    return as_they_are && !placeholder_ring(bytes) && size_ > 1;
  }
  bool placeholder_ring(std::size_t whole_bytes) const {
    return sim::modeled() && size_ > 1 && whole_bytes >= sim::kPlaceholderMinBytes;
  }
  // Step k sends block (rank - k) and receives block (rank - k - 1) of the [size_][block] recv.
  void ring_all_gather(void* recv, std::size_t block) {
    auto* base = static_cast<std::byte*>(recv);
    const int to = (rank_ + 1) % size_, from = (rank_ + size_ - 1) % size_;
    for (int k = 0; k + 1 < size_; ++k) {
      const int out = (rank_ - k + size_) % size_, in = (rank_ - k - 1 + size_) % size_;
      SUITE_MPI_CHECK(MPI_Sendrecv(base + block * out, as_int(block), MPI_BYTE, to, 0,
                                   base + block * in, as_int(block), MPI_BYTE, from, 0, comm_,
                                   MPI_STATUS_IGNORE));
    }
  }
  // Step k sends the partial sum of block (rank - k - 1) on and receives block (rank - k - 2)'s
  // (its sum would be added to it; under modeled compute nothing is), the last step this rank's
  // own into recv. The partial sums land in the send buffer's own blocks when it is a
  // placeholder (it holds no values to lose), else in two blocks of this call's.
  void ring_reduce_scatter(const void* send, void* recv, std::size_t block) {
    auto* base = static_cast<std::byte*>(const_cast<void*>(send));
    std::vector<std::byte> own;
    if (!sim::is_placeholder(send)) own.resize(2 * block);
    const int to = (rank_ + 1) % size_, from = (rank_ + size_ - 1) % size_;
    const void* out = base + block * ((rank_ + size_ - 1) % size_);
    for (int k = 0; k + 1 < size_; ++k) {
      const int in = (rank_ - k - 2 + 2 * size_) % size_;
      void* land = k + 2 == size_ ? recv
                   : own.empty()  ? base + block * in
                                  : own.data() + block * (k % 2);
      SUITE_MPI_CHECK(MPI_Sendrecv(out, as_int(block), MPI_BYTE, to, 0, land, as_int(block),
                                   MPI_BYTE, from, 0, comm_, MPI_STATUS_IGNORE));
      out = land;
    }
  }

  static constexpr int kRingTag = 7;

  struct Staged {
    const void* send = nullptr;
    void* recv = nullptr;
    bool staged = false;
  };

  using Clock = RunClock;  // the simulated clock in the SMPI build

  void mark_done(bool in_progress) {
    exchange_.done = true;
    exchange_.done_in_progress = in_progress;
    exchange_.t_done = Clock::now();
  }

  struct Exchange {
    bool active = false;
    bool done = false;
    bool done_in_progress = false;
    Clock::time_point t0, t_done;
    struct Part {
      Staged staged;
      void* recv_dst = nullptr;
      std::size_t bytes = 0;
    };
    std::vector<Part> parts;
    std::vector<MPI_Request> requests;
    int from = 0;  // the rank this exchange receives from
  };

  MPI_Op sum_op(DType t) const { return t == DType::bf16 ? bf16_sum_op_ : MPI_SUM; }

  // Returns the pointers MPI should see. Device buffers are copied to pinned host memory
  // unless the library is CUDA-aware (and, for reductions, the type is not bf16).
  Staged stage(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes,
               DType t, bool reduces) {
    if (!on_device_) return {send, recv, false};
    device_.synchronize();  // the kernels that produced `send` must be done before MPI reads it
    if (cuda_aware_ && !(reduces && t == DType::bf16)) return {send, recv, false};
    std::size_t need = send_bytes + recv_bytes;
    if (staging_.bytes() < need) staging_ = device_.alloc_host(need);
    auto* host = staging_.as<std::byte>();
    device_.copy_to_host(host, send, send_bytes);
    return {host, host + send_bytes, true};
  }

  // The ring exchange on GPU buffers. CUDA-aware: MPI may write `recv` as soon as the receive
  // is posted, so the kernels queued so far (the last reader of `recv`) must finish first.
  // Host-staged: nothing waits for the queued kernels. `send` (ready by contract) is copied
  // out on the side stream while they run, and the copy back into `recv` in finish_exchange
  // waits only for the work queued up to now, not for the attention queued after this call.
  // `offset`: where this part's two staging halves start in the exchange's staging buffer,
  // sized for all `parts` on the first call.
  Staged stage_exchange(const void* send, void* recv, std::size_t n, std::size_t offset,
                        const std::vector<ExchangePart>& parts) {
    if (!on_device_) return {send, recv, false};
    if (cuda_aware_) {
      if (offset == 0) device_.synchronize();
      return {send, recv, false};
    }
    if (offset == 0) {
      std::size_t total = 0;
      for (const ExchangePart& p : parts)
        total += 2 * p.count * dtype_size(p.type);
      if (exchange_staging_.bytes() < total) exchange_staging_ = device_.alloc_host(total);
      device_.mark_queued_work();
    }
    auto* host = exchange_staging_.as<std::byte>() + offset;
    device_.copy_to_host_concurrent(host, send, n);
    return {host, host + n, true};
  }

  void unstage(const Staged& s, void* recv, std::size_t recv_bytes) {
    if (s.staged) device_.copy_from_host(recv, s.recv, recv_bytes);
  }

  std::vector<MPI_Request> pending_sums_;
  std::vector<PendingV> pending_v_;  // started all-to-all-vs, oldest first
  int next_ticket_ = 0;              // start_all_reduce's, until finished
  Device& device_;
  bool on_device_ = false;
  bool cuda_aware_ = false;
  MPI_Op bf16_sum_op_ = MPI_OP_NULL;
  Buffer staging_;
  Buffer exchange_staging_;  // its own, so collectives issued meanwhile cannot overwrite it
  Exchange exchange_;
  std::vector<ExchangeTiming> log_;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(Device& device, MPI_Comm comm) {
  return std::make_unique<MpiComm>(device, comm);
}

}  // namespace suite

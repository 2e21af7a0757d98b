// The ring exchange of every transport (Comm::start_exchange / progress / finish_exchange /
// exchange_log) under mpirun: each rank sends a pattern to rank r+1 and must receive rank
// r-1's. The MPI host path runs everywhere; the GPU paths (RingExchangeGpu: MPI staged or
// CUDA-aware, NCCL on its own stream) skip with the reason where no GPU is expected and fail
// where one is but they cannot set up (tests/support/gpu_gate.hpp): a broken NCCL on a GPU
// machine fails. With one rank the exchange is to itself, which NCCL supports inside a group:
// a one-GPU check of the NCCL path.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/device/device.hpp"
#include "common/transport/comm.hpp"
#include "tests/support/gpu_gate.hpp"

namespace suite {
namespace {

constexpr std::size_t kCount = 300000;  // large enough for a rendezvous transfer

std::vector<float> pattern(int rank) {
  std::vector<float> v(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    v[i] = static_cast<float>(rank * 1000003 + static_cast<int>(i % 65521));
  return v;
}

// One exchange on `comm` over `device`'s buffers; returns what arrived.
std::vector<float> exchange_once(Device& device, Comm& comm, bool poll) {
  const int r = comm.rank(), n = comm.size();
  Buffer send = device.alloc(kCount * sizeof(float)), recv = device.alloc(kCount * sizeof(float));
  const auto mine = pattern(r);
  device.copy_from_host(send.data(), mine.data(), send.bytes());
  comm.clear_exchange_log();
  comm.reset_bytes();
  comm.start_exchange(send.data(), (r + 1) % n, recv.data(), (r - 1 + n) % n, kCount, DType::fp32);
  if (poll)
    for (int i = 0; i < 1000; ++i)
      comm.progress();
  comm.finish_exchange();
  device.synchronize();
  std::vector<float> got(kCount);
  device.copy_to_host(got.data(), recv.data(), recv.bytes());
  const auto log = comm.exchange_log();
  EXPECT_EQ(log.size(), 1u);
  if (!log.empty()) {
    EXPECT_GE(log[0].seconds, 0.0);
  }
  EXPECT_EQ(comm.bytes().sent, n > 1 ? static_cast<std::int64_t>(kCount * sizeof(float)) : 0);
  return got;
}

void expect_from_previous_rank(const std::vector<float>& got, int rank, int n) {
  EXPECT_EQ(got, pattern((rank - 1 + n) % n));
}

// The backward ring's exchange: two parts of different types and sizes (K/V in the storage
// type, dK/dV partial sums in fp64 here) in one exchange; each must arrive from rank r-1 in
// its own buffer, and the bytes sent count both.
void expect_two_part_exchange(Device& device, Comm& comm) {
  const int r = comm.rank(), n = comm.size();
  constexpr std::size_t kSmall = kCount / 3;
  Buffer send_a = device.alloc(kCount * sizeof(float)), recv_a = device.alloc(send_a.bytes());
  Buffer send_b = device.alloc(kSmall * sizeof(double)), recv_b = device.alloc(send_b.bytes());
  const auto a = pattern(r);
  std::vector<double> b(kSmall);
  for (std::size_t i = 0; i < kSmall; ++i)
    b[i] = 0.5 + r * 7.0 + static_cast<double>(i);
  device.copy_from_host(send_a.data(), a.data(), send_a.bytes());
  device.copy_from_host(send_b.data(), b.data(), send_b.bytes());
  comm.clear_exchange_log();
  comm.reset_bytes();
  comm.start_exchange({{send_a.data(), recv_a.data(), kCount, DType::fp32},
                       {send_b.data(), recv_b.data(), kSmall, DType::fp64}},
                      (r + 1) % n, (r - 1 + n) % n);
  comm.progress();
  comm.finish_exchange();
  device.synchronize();
  std::vector<float> got_a(kCount);
  std::vector<double> got_b(kSmall);
  device.copy_to_host(got_a.data(), recv_a.data(), recv_a.bytes());
  device.copy_to_host(got_b.data(), recv_b.data(), recv_b.bytes());
  expect_from_previous_rank(got_a, r, n);
  const int prev = (r - 1 + n) % n;
  for (std::size_t i = 0; i < kSmall; ++i)
    ASSERT_EQ(got_b[i], 0.5 + prev * 7.0 + static_cast<double>(i)) << i;
  EXPECT_EQ(comm.exchange_log().size(), 1u);
  EXPECT_EQ(
      comm.bytes().sent,
      n > 1 ? static_cast<std::int64_t>(kCount * sizeof(float) + kSmall * sizeof(double)) : 0);
}

TEST(RingExchange, MpiOnHostBuffersWithPolling) {
  auto device = make_cpu_device();
  auto comm = make_mpi_comm(*device, MPI_COMM_WORLD);
  expect_from_previous_rank(exchange_once(*device, *comm, true), comm->rank(), comm->size());
  expect_from_previous_rank(exchange_once(*device, *comm, false), comm->rank(), comm->size());
  expect_two_part_exchange(*device, *comm);
}

// What the transport tells a wait observer (the watchdog): a ring exchange waits for the rank
// it receives from (its world rank), a collective for the others (-1; the other rank of two).
struct RecordingObserver final : WaitObserver {
  std::vector<std::pair<std::string, int>> waits;
  int open = 0;
  void begin_wait(const char* what, int peer) override {
    waits.emplace_back(what, peer);
    ++open;
  }
  void end_wait() override { --open; }
};

TEST(RingExchange, WaitsAreReportedWithThePeer) {
  auto device = make_cpu_device();
  auto comm = make_mpi_comm(*device, MPI_COMM_WORLD);
  RecordingObserver seen;
  comm->set_wait_observer(&seen);
  const int r = comm->rank(), n = comm->size();
  exchange_once(*device, *comm, false);
  std::vector<float> x(4, 1.f), y(4);
  comm->all_reduce(x.data(), y.data(), 4, DType::fp32);
  ASSERT_EQ(seen.open, 0);
  ASSERT_EQ(seen.waits.size(), 2u);
  EXPECT_EQ(seen.waits[0], (std::pair<std::string, int>{"ring exchange", (r - 1 + n) % n}));
  EXPECT_EQ(seen.waits[1], (std::pair<std::string, int>{"all-reduce", n == 2 ? 1 - r : -1}));
}

#if defined(SUITE_HAVE_CUDA)
constexpr bool kBuildHasCuda = true;
#else
constexpr bool kBuildHasCuda = false;
#endif
#if defined(SUITE_HAVE_NCCL)
constexpr bool kBuildHasNccl = true;
#else
constexpr bool kBuildHasNccl = false;
#endif

// This rank's set-up error ("" when it set up), agreed over the ranks: every rank skips or
// fails together rather than some waiting in an exchange the others never start.
std::string agreed_setup_error(const std::string& mine) {
  int bad = mine.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!bad) return "";
  return mine.empty() ? "another rank could not set up its GPU" : mine;
}

// A CUDA device for this rank, or what stopped it ("" on success).
std::string make_gpu(std::unique_ptr<Device>& device, int local_rank) {
  if (!kBuildHasCuda) return "this build has no CUDA";
  if (visible_cuda_devices() == 0) return "the CUDA runtime sees no device";
  try {
    device = make_cuda_device(local_rank);
  } catch (const std::exception& e) {
    return std::string("CUDA device: ") + e.what();
  }
  return "";
}

TEST(RingExchangeGpu, MpiOnGpuBuffers) {
  int local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &local);
  std::unique_ptr<Device> device;
  const std::string err = agreed_setup_error(make_gpu(device, local));
  if (!err.empty()) SUITE_GPU_SETUP_FAILED(err, !kBuildHasCuda);
  auto comm = make_mpi_comm(*device, MPI_COMM_WORLD);
  expect_from_previous_rank(exchange_once(*device, *comm, false), comm->rank(), comm->size());
  expect_two_part_exchange(*device, *comm);
}

TEST(RingExchangeGpu, NcclOnItsOwnStream) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) GTEST_SKIP() << "NCCL needs one GPU per rank: run this test with one rank";
  std::unique_ptr<Device> device;
  std::unique_ptr<Comm> comm;
  std::string err = make_gpu(device, 0);
  const bool build_lacks = !kBuildHasCuda || !kBuildHasNccl;
  if (err.empty() && !kBuildHasNccl) err = "this build has no NCCL";
  if (err.empty()) {
    try {
      comm = make_nccl_comm(*device, MPI_COMM_WORLD);
    } catch (const std::exception& e) {
      err = std::string("NCCL set-up: ") + e.what();
    }
  }
  if (!err.empty()) SUITE_GPU_SETUP_FAILED(err, build_lacks);
  expect_from_previous_rank(exchange_once(*device, *comm, false), 0, 1);
  expect_two_part_exchange(*device, *comm);
}

}  // namespace
}  // namespace suite

// The ring exchange of every transport (Comm::start_exchange / progress / finish_exchange /
// exchange_log) under mpirun: each rank sends a pattern to rank r+1 and must receive rank
// r-1's. The MPI host path runs everywhere; the CUDA paths (MPI staged or CUDA-aware, NCCL on
// its own stream) skip with a message where no GPU is visible. With one rank the exchange is
// to itself, which NCCL supports inside a group: a one-GPU check of the NCCL path.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/comm.hpp"
#include "common/device.hpp"
#include "common/mpi_env.hpp"

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

bool every_rank_has_a_gpu() {
  int mine = visible_cuda_devices() > 0 ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

TEST(RingExchange, MpiOnGpuBuffers) {
  if (!every_rank_has_a_gpu()) GTEST_SKIP() << "no CUDA device visible";
  int local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &local);
  auto device = make_cuda_device(local);
  auto comm = make_mpi_comm(*device, MPI_COMM_WORLD);
  expect_from_previous_rank(exchange_once(*device, *comm, false), comm->rank(), comm->size());
  expect_two_part_exchange(*device, *comm);
}

TEST(RingExchange, NcclOnItsOwnStream) {
  if (!every_rank_has_a_gpu()) GTEST_SKIP() << "no CUDA device visible";
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) GTEST_SKIP() << "NCCL needs one GPU per rank: run this test with one rank";
  auto device = make_cuda_device(0);
  std::unique_ptr<Comm> comm;
  try {
    comm = make_nccl_comm(*device, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  expect_from_previous_rank(exchange_once(*device, *comm, false), 0, 1);
  expect_two_part_exchange(*device, *comm);
}

}  // namespace
}  // namespace suite

int main(int argc, char** argv) {
  suite::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // Only rank 0 prints, so a multi-rank run reads as one.
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}

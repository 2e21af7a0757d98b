// The layer's allocator and ledger on the CPU device (no communication): in-use accounting and
// its peak, poisoning of released buffers, the ledger's strict lookup; the GEMM row chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "bench/sp_tp/layer_comm.hpp"
#include "bench/sp_tp/layer_memory.hpp"

namespace suite::sp_tp {
namespace {

TEST(LayerMemory, CountsBuffersInUseAndTheirPeak) {
  auto device = make_cpu_device();
  LayerMemory m(*device);
  m.acquire("w", {10}, 8, Role::parameter);  // not counted
  m.acquire("a", {4, 4}, 8, Role::saved);
  m.acquire("tmp", {8}, 4, Role::temporary);
  EXPECT_EQ(m.in_use_bytes(), 128 + 32);
  m.release("tmp");
  EXPECT_EQ(m.in_use_bytes(), 128);
  m.reset_peak();
  Scratch s(m);
  s.acquire("g", {2}, 8);
  s.acquire("h", {4}, 8);
  s.release("g");
  s.acquire("g", {2}, 8);  // the cached buffer again: no new allocation, in use again
  EXPECT_EQ(m.in_use_bytes(), 128 + 16 + 32);
  EXPECT_EQ(m.peak_bytes(), 128 + 16 + 32);
  EXPECT_EQ(m.role_bytes(Role::backward), 48);
  EXPECT_THROW(m.acquire("a", {4, 5}, 8, Role::saved), std::logic_error);
}

TEST(LayerMemory, PoisonsReleasedBuffersWithNaN) {
  auto device = make_cpu_device();
  LayerMemory m(*device);
  const Buffer& b = m.acquire("t", {3}, sizeof(double), Role::temporary);
  b.as<double>()[0] = 1.0;
  m.release("t");
  EXPECT_EQ(b.as<double>()[0], 1.0);  // released only
  m.reacquire("t");
  m.set_poison(true);
  m.release("t");
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(std::isnan(b.as<double>()[i]));
  float f;
  std::memcpy(&f, b.data(), sizeof f);
  EXPECT_TRUE(std::isnan(f));  // every dtype's NaN
}

TEST(Ledger, HandsOutSavedBuffersByNameOnly) {
  auto device = make_cpu_device();
  LayerMemory m(*device);
  m.acquire("x", {2}, 8, Role::saved);
  m.acquire("tmp", {2}, 8, Role::temporary);
  m.acquire("y", {3}, 8, Role::saved);
  const Ledger ledger(m, m.ledger_entries());
  ASSERT_EQ(ledger.entries().size(), 2u);
  EXPECT_EQ(ledger.entries()[0].name, "x");
  EXPECT_EQ(ledger.entries()[1].bytes, 24);
  EXPECT_EQ(ledger.get("y").data(), m.buffer("y").data());
  try {
    ledger.get("tmp");
    FAIL() << "a temporary was handed to the backward";
  } catch (const LedgerMiss& e) {
    EXPECT_NE(std::string(e.what()).find("'tmp'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x, y"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ledger.without("x").get("x"), LedgerMiss);
  EXPECT_NO_THROW(ledger.without("x").get("y"));
}

TEST(GemmChunks, CoverTheRowsOnceInOrder) {
  for (int t : {1, 2, 3, 8}) {
    const int chunks = gemm_row_chunks(t);
    EXPECT_GE(chunks, t - 1);
    for (std::int64_t rows : {1, 7, 64, 1000}) {
      std::int64_t next = 0;
      for (int i = 0; i < chunks; ++i) {
        const auto [b, e] = chunk_rows(rows, chunks, i);
        EXPECT_EQ(b, next);
        EXPECT_GE(e, b);
        next = e;
      }
      EXPECT_EQ(next, rows);
    }
  }
}

}  // namespace
}  // namespace suite::sp_tp

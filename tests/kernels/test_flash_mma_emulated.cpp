// The tensor-core flash kernel's body (flash_mma_block.hpp), run on the CPU through the SIMT
// emulator with the PTX primitives emulated, against the double-precision reference: every
// mask kind a ring or Ulysses step produces, GQA, d = 64 and 128, odd sizes, strided rows,
// and cp.async copies landing both at issue and as late as the kernel's waits allow. This runs
// the very source the GPU compiles, on machines without a GPU. The emulator itself is tested
// first: it must catch the mistakes it is there to catch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/attention/flash_mma_block.hpp"
#include "tests/kernels/attention_blocks.hpp"
#include "tests/kernels/emulated_mma_hw.hpp"
#include "tests/kernels/kernel_test_util.hpp"

namespace suite::kernels {
namespace {

using test::Block;
using test::EmulatedHw;
using test::Kind;
using test::simt::BlockRun;
using test::simt::CopyTiming;
using test::simt::Region;

using test::simt::AlignedBytes;
using test::simt::join;

// ---- The emulator catches what it must --------------------------------------------------

TEST(SimtEmulator, DetectsADeadlockedBarrier) {
  AlignedBytes smem(64);
  BlockRun run(64, CopyTiming::eager, {smem.data, smem.bytes}, {});
  run.run([](int tid) {
    if (tid < 32) test::simt::sync_threads();  // warp 1 never arrives
  });
  ASSERT_EQ(run.errors().size(), 1u);
  EXPECT_NE(run.errors()[0].find("deadlock"), std::string::npos) << run.errors()[0];
}

TEST(SimtEmulator, DeferredCopiesLandOnlyAtTheirWait) {
  AlignedBytes smem(32 * 16), global(32 * 16);
  std::memset(global.data, 7, global.bytes);
  std::memset(smem.data, 0, smem.bytes);
  std::vector<int> before(32, -1), after(32, -1);
  BlockRun run(32, CopyTiming::deferred, {smem.data, smem.bytes}, {{global.data, global.bytes}});
  run.run([&](int tid) {
    EmulatedHw::cp_async16(smem.data + tid * 16, global.data + tid * 16, 16);
    EmulatedHw::cp_async_commit();
    before[tid] = smem.data[tid * 16];  // a read before the wait sees the old bytes
    EmulatedHw::cp_async_wait<0>();
    after[tid] = smem.data[tid * 16];
  });
  EXPECT_TRUE(run.errors().empty()) << join(run.errors());
  EXPECT_EQ(before, std::vector<int>(32, 0));
  EXPECT_EQ(after, std::vector<int>(32, 7));
}

TEST(SimtEmulator, FlagsOutOfBoundsMisalignedAndUnwaitedCopies) {
  AlignedBytes smem(64), global(64);
  BlockRun run(32, CopyTiming::deferred, {smem.data, smem.bytes}, {{global.data, global.bytes}});
  run.run([&](int tid) {
    // A warp-wide shared load, lane 0's out of range.
    EmulatedHw::lds32(reinterpret_cast<bf16*>(smem.data + (tid == 0 ? 64 : 4 * (tid % 16))));
    if (tid == 0) {
      EmulatedHw::cp_async16(smem.data + 64, global.data, 16);  // past the shared end
      EmulatedHw::cp_async16(smem.data, global.data + 8, 16);   // misaligned source
      EmulatedHw::cp_async16(smem.data, global.data, 16);       // never waited for
      EmulatedHw::cp_async_commit();
    }
  });
  const std::string all = join(run.errors());
  EXPECT_NE(all.find("cp.async destination"), std::string::npos) << all;
  EXPECT_NE(all.find("cp.async source: address not 16-byte aligned"), std::string::npos) << all;
  EXPECT_NE(all.find("32-bit shared load"), std::string::npos) << all;
  EXPECT_NE(all.find("outstanding"), std::string::npos) << all;
}

TEST(SimtEmulator, CountsBankConflicts) {
  // 32 words in 32 banks; the same word read by every lane (a broadcast); two words 128 bytes
  // apart in one bank; 8 words with a 32-word stride, all in bank 0.
  std::size_t spread[32], same[32], two[32], stride[8];
  for (std::size_t i = 0; i < 32; ++i) {
    spread[i] = 4 * i;
    same[i] = 12;
    two[i] = i < 16 ? 4 * i : 4 * i + 128 - 64;
  }
  for (std::size_t i = 0; i < 8; ++i)
    stride[i] = 128 * i;
  EXPECT_EQ(test::simt::bank_ways(spread, 32), 1);
  EXPECT_EQ(test::simt::bank_ways(same, 32), 1);
  EXPECT_EQ(test::simt::bank_ways(two, 32), 2);
  EXPECT_EQ(test::simt::bank_ways(stride, 8), 8);
}

// The emulated mma against a plain matrix product, with the operands distributed by the
// kernel's own fragment helpers (tile_mask.hpp) and the result gathered the same way: the
// helpers and the emulator's per-element reading of the PTX tables must agree.
TEST(SimtEmulator, MmaComputesTheTileProduct) {
  float A[16][16], B[16][8];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      A[i][j] = to_float(to_bf16(0.25f * static_cast<float>((i * 7 + j * 3) % 11) - 1.0f));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j)
      B[i][j] = to_float(to_bf16(0.5f * static_cast<float>((i * 5 + j * 2) % 9) - 2.0f));
  float C[16][8] = {};
  AlignedBytes smem(16);
  BlockRun run(32, CopyTiming::eager, {smem.data, smem.bytes}, {});
  run.run([&](int lane) {
    unsigned a[4], b[2];
    for (int r = 0; r < 4; ++r) {
      const FragCoord x = mma_a_coord(lane, r);
      a[r] = EmulatedHw::pack_bf16(A[x.row][x.col], A[x.row][x.col + 1]);
    }
    for (int r = 0; r < 2; ++r) {
      const FragCoord x = mma_b_coord(lane, r);
      b[r] = EmulatedHw::pack_bf16(B[x.row][x.col], B[x.row + 1][x.col]);
    }
    float c[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    EmulatedHw::mma(c, a, b[0], b[1]);
    for (int e = 0; e < 4; ++e) {
      const FragCoord x = mma_c_coord(lane, e);
      C[x.row][x.col] = c[e];
    }
  });
  ASSERT_TRUE(run.errors().empty()) << join(run.errors());
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 8; ++j) {
      double want = 1.0;
      for (int k = 0; k < 16; ++k)
        want += static_cast<double>(A[i][k]) * B[k][j];
      EXPECT_FLOAT_EQ(C[i][j], static_cast<float>(want)) << i << "," << j;
    }
  }
}

// ---- The kernel body --------------------------------------------------------------------

struct MmaCase {
  Kind kind;
  std::int64_t cq, ck;
  int a, nkv, d;
  CopyTiming timing;
};

// Runs every block of the kernel's grid, one after another, each on freshly poisoned shared
// memory (0xff bytes are bf16 NaNs: a fragment read before its copy landed shows up as NaN).
template <int D>
std::vector<std::string> run_kernel(const AttentionParams& p, CopyTiming timing,
                                    const std::vector<bf16>& q, const std::vector<bf16>& k,
                                    const std::vector<bf16>& v, const Block& blk,
                                    std::vector<bf16>& o, std::vector<float>& lse) {
  AlignedBytes smem(static_cast<std::size_t>(flash_mma::smem_bytes<D>()));
  const std::vector<Region> globals = {{q.data(), q.size() * 2},
                                       {k.data(), k.size() * 2},
                                       {v.data(), v.size() * 2},
                                       {o.data(), o.size() * 2},
                                       {lse.data(), lse.size() * sizeof(float)}};
  const float scale_log2 = static_cast<float>(p.softmax_scale) * flash_mma::kLog2e;
  std::vector<std::string> errors;
  for (int by = 0; by < p.heads; ++by) {
    for (std::int64_t bx = 0; bx < tile_count(p.cq, flash_mma::kBr); ++bx) {
      std::memset(smem.data, 0xff, smem.bytes);
      BlockRun run(flash_mma::kThreads, timing, {smem.data, smem.bytes}, globals);
      run.run([&](int tid) {
        flash_mma::block<D, EmulatedHw>(p, scale_log2, q.data(), k.data(), v.data(), blk.qp.data(),
                                        blk.kp.data(), o.data(), lse.data(), smem.data, tid,
                                        static_cast<int>(bx), by);
      });
      for (const std::string& e : run.errors())
        errors.push_back("block (" + std::to_string(bx) + ", " + std::to_string(by) + "): " + e);
      if (!errors.empty()) return errors;
    }
  }
  return errors;
}

std::vector<bf16> to_storage(std::vector<float>& values) {
  std::vector<bf16> h(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    h[i] = to_bf16(values[i]);
    values[i] = to_float(h[i]);  // the reference sees exactly what the kernel reads
  }
  return h;
}

void PrintTo(const MmaCase& c, std::ostream* os);  // the case's test name

class FlashMmaEmulated : public ::testing::TestWithParam<MmaCase> {};

TEST_P(FlashMmaEmulated, MatchesReference) {
  const MmaCase c = GetParam();
  test::AttentionProblem x = test::make_problem(c.kind, c.cq, c.ck, c.a, c.nkv, c.d);
  const AttentionParams& p = x.p;
  const Block& blk = x.blk;
  std::vector<float>&q = x.q, &k = x.k, &v = x.v;
  const std::vector<bf16> qb = to_storage(q), kb = to_storage(k), vb = to_storage(v);
  std::vector<bf16> ob(static_cast<std::size_t>(p.cq * p.ld_o), to_bf16(0.0f));
  std::vector<float> lse(static_cast<std::size_t>(c.a) * c.cq, 12345.0f);
  EmulatedHw::worst_lds32_ways = EmulatedHw::worst_ldmatrix_ways = 0;
  const std::vector<std::string> errors =
      c.d == 64 ? run_kernel<64>(p, c.timing, qb, kb, vb, blk, ob, lse)
                : run_kernel<128>(p, c.timing, qb, kb, vb, blk, ob, lse);
  ASSERT_TRUE(errors.empty()) << join(errors);
  // The row padding (mma_smem_stride) keeps every fragment load and ldmatrix phase on 32
  // distinct banks: a speed property the CPU can check.
  EXPECT_EQ(EmulatedHw::worst_lds32_ways, 1);
  if (c.kind != Kind::masked) {  // a fully masked block loads no V
    EXPECT_EQ(EmulatedHw::worst_ldmatrix_ways, 1);
  }
  std::vector<float> o(ob.size());
  for (std::size_t i = 0; i < ob.size(); ++i)
    o[i] = to_float(ob[i]);
  test::expect_matches_reference(p, blk, q, k, v, o, lse, 1.0 / 256, "emulated mma kernel");
}

std::vector<MmaCase> mma_cases() {
  std::vector<MmaCase> cases;
  for (CopyTiming timing : {CopyTiming::eager, CopyTiming::deferred}) {
    for (Kind kind : test::kAllKinds)
      cases.push_back({kind, 128, 128, 2, 2, 64, timing});
    cases.push_back({Kind::top_left, 130, 200, 4, 2, 128, timing});  // GQA, ragged tiles
  }
  // Odd sizes, GQA and tiles skipped from positions, on one timing each.
  cases.push_back({Kind::full, 77, 133, 3, 1, 64, CopyTiming::deferred});
  cases.push_back({Kind::bottom_right, 65, 191, 2, 1, 128, CopyTiming::eager});
  cases.push_back({Kind::top_left, 200, 72, 2, 1, 64, CopyTiming::deferred});
  cases.push_back({Kind::zigzag, 96, 96, 2, 2, 128, CopyTiming::deferred});
  cases.push_back({Kind::striped, 64, 64, 1, 1, 128, CopyTiming::eager});
  cases.push_back({Kind::masked, 33, 17, 2, 1, 64, CopyTiming::eager});
  cases.push_back({Kind::full, 1, 1, 1, 1, 128, CopyTiming::deferred});
  // Keys only the block's later warps see: tile skipping must use the block's largest query
  // position, not warp 0's.
  cases.push_back({Kind::bottom_right, 64, 100, 1, 1, 64, CopyTiming::eager});
  return cases;
}

std::string mma_case_name(const ::testing::TestParamInfo<MmaCase>& info) {
  const MmaCase& c = info.param;
  return std::string(test::kind_name(c.kind)) + "_q" + std::to_string(c.cq) + "_k" +
         std::to_string(c.ck) + "_a" + std::to_string(c.a) + "_kv" + std::to_string(c.nkv) + "_d" +
         std::to_string(c.d) + (c.timing == CopyTiming::eager ? "_eager" : "_deferred");
}

void PrintTo(const MmaCase& c, std::ostream* os) {
  *os << mma_case_name({c, 0});
}

INSTANTIATE_TEST_SUITE_P(Blocks, FlashMmaEmulated, ::testing::ValuesIn(mma_cases()), mma_case_name);

}  // namespace
}  // namespace suite::kernels

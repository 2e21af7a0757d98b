// The suite's CUDA attention backward kernel body (attention_backward_block.hpp), run on the
// CPU through the SIMT emulator (one fiber per thread, switching at barriers; atomics as plain
// adds), against the double-precision reference gradients: every mask kind a ring or Ulysses
// step produces, GQA, d = 64 and 128, odd sizes, strided rows, bf16 and fp32 storage, rows
// that see no key, and key blocks adding up to the full gradient with the final statistics.
// This is the very source the GPU compiles, checked on machines without a GPU. Shared memory
// starts poisoned with NaNs, so a read before its write (a missing barrier) shows up.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/attention/attention_backward_block.hpp"
#include "kernels/core/bf16.hpp"
#include "tests/kernels/attention_blocks.hpp"
#include "tests/kernels/kernel_test_util.hpp"
#include "tests/kernels/simt_emulator.hpp"

namespace suite::kernels {
namespace {

using test::Kind;
using test::simt::BlockRun;
using test::simt::CopyTiming;
using test::simt::Region;

// The kernel's two primitives on the emulator: fibers switch only at barriers, so a plain +=
// is atomic.
struct EmulatedBwdHw {
  static void sync_threads() { test::simt::sync_threads(); }
  static void atomic_add(float* p, float v) { *p += v; }
};

using test::simt::AlignedBytes;
using test::simt::join;

// The block's inputs in the storage type S, and its fp32 accumulators.
template <class S>
struct Device {
  std::vector<S> q, k, v, d_o;
  std::vector<float> lse, delta, dq, dk, dv;
};

template <class S>
std::vector<S> to_storage(const std::vector<float>& values) {
  std::vector<S> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<S, bf16>) {
      out[i] = to_bf16(values[i]);
    } else {
      out[i] = values[i];
    }
  }
  return out;
}

float value(float x) {
  return x;
}
float value(bf16 x) {
  return to_float(x);
}

// Runs every block of the kernel's grid, one after another, each on freshly poisoned shared
// memory (0xff bytes: NaN in fp32 and in bf16).
template <class S, int D>
std::vector<std::string> run_kernel(const AttentionParams& p, const test::Block& blk,
                                    Device<S>& x) {
  AlignedBytes smem(attn_bwd::SmemLayout<S, D>::bytes);
  std::vector<std::string> errors;
  for (int h = 0; h < p.heads; ++h) {
    for (std::int64_t tile = 0; tile < tile_count(p.cq, attn_bwd::kBr); ++tile) {
      std::memset(smem.data, 0xff, smem.bytes);
      BlockRun run(attn_bwd::kBr, CopyTiming::eager, {smem.data, smem.bytes}, {});
      run.run([&](int tid) {
        attn_bwd::block<S, D, EmulatedBwdHw>(p, x.q.data(), x.k.data(), x.v.data(), x.d_o.data(),
                                             x.lse.data(), x.delta.data(), blk.qp.data(),
                                             blk.kp.data(), x.dq.data(), x.dk.data(), x.dv.data(),
                                             smem.data, tid, static_cast<int>(tile), h);
      });
      for (const std::string& e : run.errors())
        errors.push_back("block (" + std::to_string(tile) + ", " + std::to_string(h) + "): " + e);
      if (!errors.empty()) return errors;
    }
  }
  return errors;
}

template <class S>
constexpr bool is_bf16 = std::is_same_v<S, bf16>;

// A problem as a GPU training step holds it: q, k, v, dO in the storage type (the references
// see the rounded values), lse in fp32, o stored in the storage type and delta = rowsum(dO o)
// summed in fp32 from the stored o (as cuda::attention_backward_delta does; NaN for queries
// that see no key). Accumulators start at zero, the padding between dq's rows at NaN (the
// kernel must leave it alone).
template <class S>
Device<S> device_inputs(test::AttentionProblem& x, test::BackwardProblem& ref) {
  if constexpr (is_bf16<S>) {
    for (auto* t : {&x.q, &x.k, &x.v})
      for (float& e : *t)
        e = to_float(to_bf16(e));
  }
  ref = test::make_backward(x, is_bf16<S>);
  const AttentionParams& p = x.p;
  Device<S> d{to_storage<S>(x.q),
              to_storage<S>(x.k),
              to_storage<S>(x.v),
              to_storage<S>(ref.d_o),
              {},
              {},
              {},
              {},
              {}};
  std::vector<float> o_f(ref.o.begin(), ref.o.end());
  const std::vector<S> o = to_storage<S>(o_f);
  d.lse.assign(ref.lse.begin(), ref.lse.end());
  d.delta.assign(d.lse.size(), 0.0f);
  for (int h = 0; h < p.heads; ++h)
    for (std::int64_t i = 0; i < p.cq; ++i) {
      float s = 0.0f;
      for (int c = 0; c < p.head_dim; ++c) {
        const std::int64_t e = i * p.ld_o + h * p.head_dim + c;
        s += value(o[e]) * value(d.d_o[e]);
      }
      // A query that sees no key: its delta must never reach a gradient (NaN would show).
      d.delta[h * p.cq + i] =
          std::isinf(ref.lse[h * p.cq + i]) ? std::numeric_limits<float>::quiet_NaN() : s;
    }
  d.dq.assign(x.q.size(), 0.0f);
  d.dk.assign(x.k.size(), 0.0f);
  d.dv.assign(x.v.size(), 0.0f);
  for (std::int64_t i = 0; i < p.cq; ++i)
    for (std::int64_t c = static_cast<std::int64_t>(p.heads) * p.head_dim; c < p.ld_q; ++c)
      d.dq[i * p.ld_q + c] = std::numeric_limits<float>::quiet_NaN();
  return d;
}

// Tolerance on tol * (|ref| + max |ref|): fp32 arithmetic throughout; with bf16 storage the
// stored o (hence delta) carries bf16 rounding.
template <class S>
double grad_tol() {
  return is_bf16<S> ? 6e-3 : 2e-4;
}

struct BwdCase {
  Kind kind;
  std::int64_t cq, ck;
  int a, nkv, d;
  bool bf16_storage;
};

template <class S, int D>
void check_case(const BwdCase& c) {
  test::AttentionProblem x = test::make_problem(c.kind, c.cq, c.ck, c.a, c.nkv, c.d);
  test::BackwardProblem ref;
  Device<S> dev = device_inputs<S>(x, ref);
  const std::vector<std::string> errors = run_kernel<S, D>(x.p, x.blk, dev);
  ASSERT_TRUE(errors.empty()) << join(errors);
  test::expect_grads_match(x.p, ref, dev.dq, dev.dk, dev.dv, grad_tol<S>(),
                           std::string("emulated backward ") + test::kind_name(c.kind));
  for (std::int64_t i = 0; i < x.p.cq; ++i)
    for (std::int64_t e = static_cast<std::int64_t>(x.p.heads) * x.p.head_dim; e < x.p.ld_q; ++e)
      ASSERT_TRUE(std::isnan(dev.dq[i * x.p.ld_q + e])) << "dq padding written, row " << i;
}

void PrintTo(const BwdCase& c, std::ostream* os);  // the case's test name

class BackwardEmulated : public ::testing::TestWithParam<BwdCase> {};

TEST_P(BackwardEmulated, MatchesReference) {
  const BwdCase c = GetParam();
  if (c.bf16_storage) {
    c.d == 64 ? check_case<bf16, 64>(c) : check_case<bf16, 128>(c);
  } else {
    c.d == 64 ? check_case<float, 64>(c) : check_case<float, 128>(c);
  }
}

std::vector<BwdCase> bwd_cases() {
  std::vector<BwdCase> cases;
  for (bool b : {true, false}) {
    for (Kind kind : test::kAllKinds)
      cases.push_back({kind, 128, 96, 2, 2, 64, b});
    cases.push_back({Kind::top_left, 130, 200, 4, 2, 128, b});  // GQA, ragged tiles
  }
  // Odd sizes, GQA, tiles skipped from positions, one storage type each.
  cases.push_back({Kind::full, 77, 133, 3, 1, 64, true});
  cases.push_back({Kind::bottom_right, 65, 191, 2, 1, 128, false});
  cases.push_back({Kind::top_left, 200, 72, 2, 1, 64, true});
  cases.push_back({Kind::zigzag, 96, 96, 2, 2, 128, true});
  cases.push_back({Kind::striped, 64, 64, 1, 1, 128, false});
  cases.push_back({Kind::masked, 33, 17, 2, 1, 64, true});
  cases.push_back({Kind::full, 1, 1, 1, 1, 128, true});
  // Keys only the block's later rows see: tile skipping must use the block's largest position.
  cases.push_back({Kind::bottom_right, 64, 100, 1, 1, 64, false});
  return cases;
}

std::string bwd_case_name(const ::testing::TestParamInfo<BwdCase>& info) {
  const BwdCase& c = info.param;
  return std::string(test::kind_name(c.kind)) + "_q" + std::to_string(c.cq) + "_k" +
         std::to_string(c.ck) + "_a" + std::to_string(c.a) + "_kv" + std::to_string(c.nkv) + "_d" +
         std::to_string(c.d) + (c.bf16_storage ? "_bf16" : "_fp32");
}

void PrintTo(const BwdCase& c, std::ostream* os) {
  *os << bwd_case_name({c, 0});
}

INSTANTIATE_TEST_SUITE_P(Blocks, BackwardEmulated, ::testing::ValuesIn(bwd_cases()), bwd_case_name);

// The ring's use: with the final lse and delta, the kernel run over each key block on its own,
// adding into the same accumulators, gives the gradient over all keys.
TEST(BackwardEmulatedKeyBlocks, ContributionsAddUpToTheFullGradient) {
  for (bool zigzag : {false, true}) {
    const int n = 3;
    const std::int64_t c = 40;
    const auto layout = zigzag ? test::Layout::zigzag : test::Layout::contiguous;
    test::AttentionProblem x = test::all_keys_problem(layout, 1, n, c);
    test::BackwardProblem ref;
    Device<float> dev = device_inputs<float>(x, ref);
    for (int r = 0; r < n; ++r) {  // key block r: rows [r c, (r+1) c)
      AttentionParams pb = x.p;
      pb.ck = c;
      const std::int64_t off = r * c * x.p.ld_k;
      test::Block bb = x.blk;
      bb.kp.assign(x.blk.kp.begin() + r * c, x.blk.kp.begin() + (r + 1) * c);
      Device<float> part = dev;
      part.k.assign(dev.k.begin() + off, dev.k.begin() + off + c * x.p.ld_k);
      part.v.assign(dev.v.begin() + off, dev.v.begin() + off + c * x.p.ld_v);
      part.dk.assign(dev.dk.begin() + off, dev.dk.begin() + off + c * x.p.ld_k);
      part.dv.assign(dev.dv.begin() + off, dev.dv.begin() + off + c * x.p.ld_v);
      const auto errors = run_kernel<float, 64>(pb, bb, part);
      ASSERT_TRUE(errors.empty()) << join(errors);
      dev.dq = part.dq;
      std::copy(part.dk.begin(), part.dk.end(), dev.dk.begin() + off);
      std::copy(part.dv.begin(), part.dv.end(), dev.dv.begin() + off);
    }
    test::expect_grads_match(x.p, ref, dev.dq, dev.dk, dev.dv, grad_tol<float>(),
                             zigzag ? "zigzag" : "contiguous");
  }
}

// Shared-memory layout: every array aligned for its type and the whole within what one block
// may opt into (227 KiB on H100, 163 KiB on A100; the fp32 d = 128 kernel is the largest).
TEST(BackwardEmulatedLayout, SharedMemoryFits) {
  using L32 = attn_bwd::SmemLayout<float, 128>;
  using L16 = attn_bwd::SmemLayout<bf16, 128>;
  EXPECT_LE(L32::bytes, 163u * 1024);
  EXPECT_LE(L16::bytes, 80u * 1024);  // bf16: three blocks per H100 SM
  for (std::size_t off :
       {L32::p, L32::ds, L32::q, L32::d_o, L32::k, L32::v, L16::q, L16::d_o, L16::k, L16::v})
    EXPECT_EQ(off % 4, 0u);
  // Odd words per padded row: conflict-free row reads (see row_stride).
  EXPECT_EQ((attn_bwd::row_stride<float, 64>() * 4 / 4) % 2, 1);
  EXPECT_EQ((attn_bwd::row_stride<bf16, 128>() * 2 / 4) % 2, 1);
}

}  // namespace
}  // namespace suite::kernels

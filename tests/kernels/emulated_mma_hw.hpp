// The hardware policy of flash_mma::block (flash_mma_block.hpp) emulated on the CPU: the PTX
// instructions the GPU policy issues, with their semantics as the PTX ISA states them, on top
// of the SIMT emulator. The fragment layouts are decoded here per element from the ISA's
// tables ("Matrix fragments for mma.m16n8k16", "ldmatrix"), independently of tile_mask.hpp's
// coordinate helpers that the kernel indexes with.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/core/bf16.hpp"
#include "tests/kernels/simt_emulator.hpp"

namespace suite::kernels::test {

struct EmulatedHw {
  using Elem = bf16;

  // The worst shared-memory bank conflict seen (ways: 1 = conflict-free) of each warp-wide
  // shared load, for the tests to assert the padding does its job; reset them before a run.
  static inline int worst_lds32_ways = 0, worst_ldmatrix_ways = 0;

  static void cp_async16(void* dst, const void* src, int src_bytes) {
    simt::cp_async(dst, src, 16, static_cast<std::size_t>(src_bytes));
  }
  static void cp_async_commit() { simt::cp_async_commit(); }
  template <int N>
  static void cp_async_wait() {
    simt::cp_async_wait(N);
  }
  static void sync_threads() { simt::sync_threads(); }

  // __shfl_xor_sync over the full warp.
  template <class T>
  static T shfl_xor(T v, int lane_mask) {
    const unsigned char* all = simt::warp_exchange(&v, sizeof v);
    const int src = (simt::thread_id() % 32) ^ lane_mask;
    T r;
    std::memcpy(&r, all + src * simt::kExchangeBytes, sizeof r);
    return r;
  }

  // mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: c (16x8) += a (16x16) b (16x8).
  // Lane = 4 * groupID + threadID_in_group. A element i (0..7; register i/2, low half first):
  // row groupID (+8 for i = 2, 3, 6, 7), column 2 threadID_in_group + i%2 (+8 for i >= 4).
  // B element i (0..3): row 2 threadID_in_group + i%2 (+8 for i >= 2), column groupID.
  // C element i (0..3): row groupID (+8 for i >= 2), column 2 threadID_in_group + i%2.
  static void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    const unsigned mine[6] = {a[0], a[1], a[2], a[3], b0, b1};
    const unsigned char* all = simt::warp_exchange(mine, sizeof mine);
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      unsigned regs[6];
      std::memcpy(regs, all + lane * simt::kExchangeBytes, sizeof regs);
      const int group = lane / 4, tig = lane % 4;
      for (int i = 0; i < 8; ++i) {
        const int row = group + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0);
        const int col = 2 * tig + i % 2 + (i >= 4 ? 8 : 0);
        A[row][col] = half(regs[i / 2], i % 2);
      }
      for (int i = 0; i < 4; ++i)
        B[2 * tig + i % 2 + (i >= 2 ? 8 : 0)][group] = half(regs[4 + i / 2], i % 2);
    }
    const int lane = simt::thread_id() % 32, group = lane / 4, tig = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = group + (i >= 2 ? 8 : 0), col = 2 * tig + i % 2;
      double sum = 0.0;  // bf16 products are exact; fp32 accumulation order is unspecified
      for (int kk = 0; kk < 16; ++kk)
        sum += static_cast<double>(A[row][kk]) * B[kk][col];
      c[i] = static_cast<float>(c[i] + sum);
    }
  }

  // ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lanes 8m..8m+7 give the addresses of rows
  // 0..7 of matrix m (16 bytes each); transposed, lane (groupID, threadID_in_group) receives
  // in r[m] elements (row 2 threadID_in_group, column groupID) and (row + 1, same column).
  static void ldmatrix_x4_trans(unsigned (&r)[4], const void* row_addr) {
    // A lane whose row is out of bounds offers none (its neighbours read zeros from it).
    if (!simt::check_shared(row_addr, 16, 16, "ldmatrix row")) row_addr = nullptr;
    const unsigned char* all = simt::warp_exchange(&row_addr, sizeof row_addr);
    const int lane = simt::thread_id() % 32, group = lane / 4, tig = lane % 4;
    if (lane == 0) {  // each matrix is one phase: its 8 rows of 16 bytes
      for (int m = 0; m < 4; ++m) {
        std::size_t words[32];
        for (int row = 0; row < 8; ++row) {
          const void* addr;
          std::memcpy(&addr, all + (8 * m + row) * simt::kExchangeBytes, sizeof addr);
          for (int w = 0; w < 4; ++w)
            words[4 * row + w] = addr ? simt::shared_offset(addr) + 4 * w : 0;
        }
        worst_ldmatrix_ways = std::max(worst_ldmatrix_ways, simt::bank_ways(words, 32));
      }
    }
    for (int m = 0; m < 4; ++m) {
      std::uint16_t e[2];
      for (int j = 0; j < 2; ++j) {
        const unsigned char* row;
        std::memcpy(&row, all + (8 * m + 2 * tig + j) * simt::kExchangeBytes, sizeof row);
        e[j] = 0;
        if (row) std::memcpy(&e[j], row + 2 * group, 2);
      }
      r[m] = e[0] | static_cast<unsigned>(e[1]) << 16;
    }
  }

  static unsigned pack_bf16(float lo, float hi) {
    return to_bf16(lo).bits | static_cast<unsigned>(to_bf16(hi).bits) << 16;
  }
  static unsigned lds32(const Elem* p) {
    unsigned v = 0;
    const bool ok = simt::check_shared(p, 4, 4, "32-bit shared load");
    if (ok) std::memcpy(&v, p, 4);
    // Warp-wide, as the GPU issues it: the 32 lanes' words against the 32 banks.
    const std::size_t mine = ok ? simt::shared_offset(p) : 0;
    const unsigned char* all = simt::warp_exchange(&mine, sizeof mine);
    if (simt::thread_id() % 32 == 0) {
      std::size_t words[32];
      for (int lane = 0; lane < 32; ++lane)
        std::memcpy(&words[lane], all + lane * simt::kExchangeBytes, sizeof words[lane]);
      worst_lds32_ways = std::max(worst_lds32_ways, simt::bank_ways(words, 32));
    }
    return v;
  }
  static void store32(Elem* p, unsigned v) {
    if (simt::check_global(p, 4, 4, "32-bit global store"))
      std::memcpy(static_cast<void*>(p), &v, 4);
  }
  static void store_lse(float* p, float v) {
    if (simt::check_global(p, 4, 4, "lse store")) *p = v;
  }

 private:
  static float half(unsigned reg, int which) {
    return to_float(bf16{static_cast<std::uint16_t>(which ? reg >> 16 : reg & 0xffffu)});
  }
};

}  // namespace suite::kernels::test

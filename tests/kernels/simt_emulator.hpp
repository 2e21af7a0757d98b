// A small SIMT emulator for running a CUDA kernel's block body on the CPU: every thread of a
// block is a cooperative fiber, and the fibers switch only at barriers (block or warp), so a
// run is deterministic. Warp collectives (shuffles, mma, ldmatrix) are built on a warp
// exchange; cp.async copies are queued and land eagerly (at issue) or as late as the kernel
// allows (at its wait_group), so a read before the wait or a refill during another warp's
// read shows up as wrong results. Shared and global accesses of the emulated primitives are
// bounds- and alignment-checked (a failing access is recorded and not performed); violations
// and deadlocks (a barrier not every thread reaches) are collected as errors instead of
// crashing the test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <string>
#include <vector>

namespace suite::kernels::test::simt {

enum class CopyTiming { eager, deferred };

struct Region {
  const void* base;
  std::size_t bytes;
};

// One block of `threads` threads (a multiple of 32). Only one block runs at a time.
class BlockRun {
 public:
  BlockRun(int threads, CopyTiming timing, Region shared, std::vector<Region> globals);
  ~BlockRun();
  BlockRun(const BlockRun&) = delete;
  BlockRun& operator=(const BlockRun&) = delete;

  // Runs body(tid) on every thread to completion (or to a deadlock, recorded as an error).
  void run(const std::function<void(int tid)>& body);
  const std::vector<std::string>& errors() const { return errors_; }

  struct Impl;

 private:
  Impl* impl_;
  std::vector<std::string> errors_;
};

// Called from inside a running body (the current fiber's thread):
int thread_id();
void sync_threads();
// Warp exchange: publishes `bytes` from `mine` for this lane, waits for the warp, and returns
// the 32 lanes' published records (valid until this lane's next exchange).
const unsigned char* warp_exchange(const void* mine, std::size_t bytes);
constexpr std::size_t kExchangeBytes = 64;  // the largest record a lane may publish

void cp_async(void* dst, const void* src, std::size_t bytes, std::size_t src_bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending_allowed);

// Byte offset of p from the start of the block's shared memory (banks count from there).
std::size_t shared_offset(const void* p);

// Shared-memory bank conflicts of one warp-wide access: the most distinct 4-byte words any of
// the 32 banks serves (1: conflict-free; a word read by several lanes is broadcast once).
// words: the byte offsets of the words the access touches.
int bank_ways(const std::size_t* word_offsets, std::size_t n);

// Checked accesses: `what` names the primitive in the error. False (and an error recorded)
// when the access is out of bounds or misaligned: the caller then skips it.
bool check_shared(const void* p, std::size_t bytes, std::size_t align, const char* what);
bool check_global(const void* p, std::size_t bytes, std::size_t align, const char* what);

// Memory an emulated kernel addresses as global memory: 16-byte aligned, as cudaMalloc's is
// at least, so the checked accesses see the alignment a real launch would.
struct AlignedBytes {
  explicit AlignedBytes(std::size_t n)
      : bytes(n), data(static_cast<unsigned char*>(::operator new(n, std::align_val_t(16)))) {}
  ~AlignedBytes() { ::operator delete(data, std::align_val_t(16)); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  std::size_t bytes;
  unsigned char* data;
};

// A run's recorded errors, one per indented line, for a test's failure message.
inline std::string join(const std::vector<std::string>& errors) {
  std::string s;
  for (const std::string& e : errors)
    s += "\n  " + e;
  return s;
}

}  // namespace suite::kernels::test::simt

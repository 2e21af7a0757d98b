#include "tests/kernels/simt_emulator.hpp"

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <set>

namespace suite::kernels::test::simt {
namespace {

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr std::size_t kMaxErrors = 20;

struct Copy {
  void* dst;
  const void* src;
  std::size_t bytes, src_bytes;
};

void land(const Copy& c) {
  std::memcpy(c.dst, c.src, c.src_bytes);
  std::memset(static_cast<unsigned char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
}

enum class State { runnable, waiting, done };

struct Fiber {
  ucontext_t ctx{};
  std::unique_ptr<char[]> stack;
  State state = State::runnable;
  std::uint64_t exchanges = 0;  // parity selects the warp's exchange buffer
  std::vector<Copy> open_group;
  std::deque<std::vector<Copy>> committed;
};

}  // namespace

struct BlockRun::Impl {
  int threads = 0;
  CopyTiming timing = CopyTiming::eager;
  Region shared{};
  std::vector<Region> globals;
  std::vector<std::string>* errors = nullptr;

  std::vector<Fiber> fibers;
  ucontext_t scheduler{};
  int current = -1;
  const std::function<void(int)>* body = nullptr;
  int block_arrived = 0;
  std::vector<int> warp_arrived;
  // [warp][parity][lane][record]
  std::vector<unsigned char> exchange;

  void error(std::string what) {
    if (errors->size() < kMaxErrors) errors->push_back(std::move(what));
  }
  Fiber& me() { return fibers[static_cast<std::size_t>(current)]; }
  void yield() { swapcontext(&me().ctx, &scheduler); }

  // Waits until `count` threads in [first, first + count) have arrived at this barrier.
  void barrier(int& arrived, int first, int count) {
    if (++arrived < count) {
      me().state = State::waiting;
      yield();
      return;
    }
    arrived = 0;
    for (int i = first; i < first + count; ++i)
      if (fibers[i].state == State::waiting) fibers[i].state = State::runnable;
  }
};

namespace {

thread_local BlockRun::Impl* active = nullptr;

BlockRun::Impl& impl() {
  return *active;
}

void fiber_main() {
  BlockRun::Impl& b = impl();
  const int tid = b.current;
  (*b.body)(tid);
  Fiber& f = b.fibers[tid];
  if (!f.open_group.empty() || !f.committed.empty())
    b.error("thread " + std::to_string(tid) + " ended with cp.async copies outstanding");
  f.state = State::done;
  // Returning switches to uc_link (the scheduler).
}

}  // namespace

BlockRun::BlockRun(int threads, CopyTiming timing, Region shared, std::vector<Region> globals)
    : impl_(new Impl) {
  impl_->threads = threads;
  impl_->timing = timing;
  impl_->shared = shared;
  impl_->globals = std::move(globals);
  impl_->errors = &errors_;
  if (threads <= 0 || threads % 32 != 0) errors_.push_back("threads must be a multiple of 32");
}

BlockRun::~BlockRun() {
  delete impl_;
}

void BlockRun::run(const std::function<void(int tid)>& body) {
  if (!errors_.empty()) return;
  Impl& b = *impl_;
  const int warps = b.threads / 32;
  b.body = &body;
  b.block_arrived = 0;
  b.warp_arrived.assign(static_cast<std::size_t>(warps), 0);
  b.exchange.assign(static_cast<std::size_t>(warps) * 2 * 32 * kExchangeBytes, 0);
  b.fibers = std::vector<Fiber>(static_cast<std::size_t>(b.threads));
  for (Fiber& f : b.fibers) {
    f.stack.reset(new char[kStackBytes]);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = &b.scheduler;
    makecontext(&f.ctx, fiber_main, 0);
  }
  Impl* outer = active;
  active = &b;
  for (int done = 0; done < b.threads;) {
    bool ran = false;
    done = 0;
    for (int i = 0; i < b.threads; ++i) {
      if (b.fibers[i].state == State::runnable) {
        b.current = i;
        swapcontext(&b.scheduler, &b.fibers[i].ctx);
        ran = true;
      }
      done += b.fibers[i].state == State::done;
    }
    if (!ran && done < b.threads) {
      b.error("deadlock: " + std::to_string(b.threads - done) +
              " threads wait at a barrier the others never reach");
      break;
    }
  }
  active = outer;
  b.current = -1;
}

int thread_id() {
  return impl().current;
}

void sync_threads() {
  impl().barrier(impl().block_arrived, 0, impl().threads);
}

const unsigned char* warp_exchange(const void* mine, std::size_t bytes) {
  BlockRun::Impl& b = impl();
  const int tid = b.current, warp = tid / 32, lane = tid % 32;
  if (bytes > kExchangeBytes) b.error("warp_exchange: record too large");
  const std::uint64_t parity = b.me().exchanges++ & 1;
  unsigned char* base =
      b.exchange.data() + ((static_cast<std::size_t>(warp) * 2 + parity) * 32) * kExchangeBytes;
  std::memcpy(base + lane * kExchangeBytes, mine, bytes < kExchangeBytes ? bytes : kExchangeBytes);
  b.barrier(b.warp_arrived[static_cast<std::size_t>(warp)], warp * 32, 32);
  return base;
}

void cp_async(void* dst, const void* src, std::size_t bytes, std::size_t src_bytes) {
  if (!check_shared(dst, bytes, 16, "cp.async destination")) return;
  if (src_bytes > 0 && !check_global(src, src_bytes, 16, "cp.async source")) return;
  if (src_bytes > bytes) {
    impl().error("cp.async: src_bytes larger than the copy");
    return;
  }
  const Copy c{dst, src, bytes, src_bytes};
  if (impl().timing == CopyTiming::eager) {
    land(c);
  } else {
    impl().me().open_group.push_back(c);
  }
}

void cp_async_commit() {
  Fiber& f = impl().me();
  f.committed.push_back(std::move(f.open_group));
  f.open_group.clear();
}

void cp_async_wait(int newest_pending_allowed) {
  Fiber& f = impl().me();
  while (f.committed.size() > static_cast<std::size_t>(newest_pending_allowed)) {
    for (const Copy& c : f.committed.front())
      land(c);
    f.committed.pop_front();
  }
}

std::size_t shared_offset(const void* p) {
  return static_cast<std::size_t>(static_cast<const unsigned char*>(p) -
                                  static_cast<const unsigned char*>(impl().shared.base));
}

int bank_ways(const std::size_t* word_offsets, std::size_t n) {
  std::set<std::size_t> words[32];
  for (std::size_t i = 0; i < n; ++i)
    words[(word_offsets[i] / 4) % 32].insert(word_offsets[i] / 4);
  std::size_t ways = 0;
  for (const auto& bank : words)
    ways = std::max(ways, bank.size());
  return static_cast<int>(ways);
}

namespace {

bool inside(const Region& r, const void* p, std::size_t bytes) {
  const auto* lo = static_cast<const unsigned char*>(r.base);
  const auto* x = static_cast<const unsigned char*>(p);
  return x >= lo && x + bytes <= lo + r.bytes;
}

bool check(bool in, const void* p, std::size_t bytes, std::size_t align, const char* what,
           const char* space) {
  if (!in) {
    impl().error(std::string(what) + ": " + std::to_string(bytes) + " bytes outside " + space +
                 " memory (thread " + std::to_string(impl().current) + ")");
    return false;
  }
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
    impl().error(std::string(what) + ": address not " + std::to_string(align) + "-byte aligned");
    return false;
  }
  return true;
}

}  // namespace

bool check_shared(const void* p, std::size_t bytes, std::size_t align, const char* what) {
  return check(inside(impl().shared, p, bytes), p, bytes, align, what, "shared");
}

bool check_global(const void* p, std::size_t bytes, std::size_t align, const char* what) {
  bool in = false;
  for (const Region& r : impl().globals)
    in = in || inside(r, p, bytes);
  return check(in, p, bytes, align, what, "global");
}

}  // namespace suite::kernels::test::simt

#include "common/harness/watchdog.hpp"

#include <cstdio>
#include <cstdlib>

#include "common/harness/errors.hpp"

namespace suite {

Watchdog::Watchdog(double timeout_s, bool may_call_mpi, int world_rank, int world_size)
    : timeout_s_(timeout_s),
      may_call_mpi_(may_call_mpi),
      world_rank_(world_rank),
      world_size_(world_size) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::kick(const std::string& doing, bool waiting_for_others) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
  waiting_ = waiting_for_others;
  last_ = Clock::now();
  doing_ = doing;
}

void Watchdog::pause() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void Watchdog::begin_wait(const char* what, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_what_ = what;
  wait_peer_ = peer;
  last_ = Clock::now();
}

void Watchdog::end_wait() {
  std::lock_guard<std::mutex> lock(mu_);
  wait_what_ = nullptr;
  last_ = Clock::now();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || !armed_) continue;
    double idle = std::chrono::duration<double>(Clock::now() - last_).count();
    const bool waiting = waiting_ || wait_what_;
    if (idle > (waiting ? 2 : 1) * timeout_s_) {
      // A rank waiting for others points at them (at the one it receives from, where the wait
      // names it); one that was working is the one stuck.
      std::string why;
      if (wait_what_ && wait_peer_ >= 0)
        why = std::string("waiting in the ") + wait_what_ + " for rank " +
              std::to_string(wait_peer_) + ", which is probably stuck or dead";
      else if (wait_what_)
        why = std::string("waiting in the ") + wait_what_ +
              " for the other ranks of its group; one of them is probably stuck or dead";
      else if (waiting_ && world_size_ == 2)
        why = "waiting for rank " + std::to_string(1 - world_rank_) +
              ", which is probably stuck or dead";
      else if (waiting_)
        why = "waiting for the other ranks in a collective; one of them is probably stuck or dead";
      else
        why = "this rank made no progress (stuck in its own work)";
      char msg[768];
      std::snprintf(msg, sizeof msg,
                    "timed out: no progress for %.0f s (--timeout %g) while in %s; %s", idle,
                    timeout_s_, doing_.c_str(), why.c_str());
      lock.unlock();
      if (may_call_mpi_) SUITE_FATAL(msg);
      std::fprintf(stderr, "[%s] %s\n", rank_label().c_str(), msg);
      std::fflush(stderr);
      std::_Exit(3);
    }
  }
}

}  // namespace suite

#include "common/watchdog.hpp"

#include <cstdio>
#include <cstdlib>

#include "common/errors.hpp"

namespace suite {

Watchdog::Watchdog(double timeout_s, bool may_call_mpi)
    : timeout_s_(timeout_s), may_call_mpi_(may_call_mpi) {
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

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || !armed_) continue;
    double idle = std::chrono::duration<double>(Clock::now() - last_).count();
    if (idle > (waiting_ ? 2 : 1) * timeout_s_) {
      // A rank waiting at a collective points at the others; one that was working is the
      // one stuck.
      const char* why = waiting_ ? "another rank probably failed or is stuck before this collective"
                                 : "this rank made no progress (stuck in its own work)";
      char msg[512];
      std::snprintf(msg, sizeof msg,
                    "timed out: no progress for %.0f s (--timeout %g) while in %s; %s", idle,
                    timeout_s_, doing_.c_str(), why);
      lock.unlock();
      if (may_call_mpi_) SUITE_FATAL(msg);
      std::fprintf(stderr, "[%s] %s\n", rank_label().c_str(), msg);
      std::fflush(stderr);
      std::_Exit(3);
    }
  }
}

}  // namespace suite

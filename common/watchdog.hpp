// Turns a hang (a collective waiting for a rank that will never come) into an error that
// names this rank and the case, then aborts the job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace suite {

class Watchdog {
 public:
  // 0 disables it. Without MPI_THREAD_MULTIPLE the watchdog may not call MPI from its
  // thread: it then ends this process, and the launcher takes the job down.
  Watchdog(double timeout_s, bool may_call_mpi);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: restarts the clock and says what the rank is doing now. A rank that is only
  // waiting for the others gets twice the time, so when one rank is stuck, its own message
  // (naming what it was doing) comes first and the job ends on it.
  void kick(const std::string& doing, bool waiting_for_others = false);
  // No deadline until the next kick (e.g. while rank 0 writes results).
  void pause();

 private:
  void watch();
  using Clock = std::chrono::steady_clock;
  double timeout_s_;
  bool may_call_mpi_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false, waiting_ = false;
  Clock::time_point last_;
  std::string doing_;
  std::thread thread_;
};

}  // namespace suite

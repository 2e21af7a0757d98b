// Turns a hang (a collective waiting for a rank that will never come) into an error that
// names this rank and the case, then aborts the job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "common/harness/wait_observer.hpp"

namespace suite {

class Watchdog final : public WaitObserver {
 public:
  // 0 disables it. Without MPI_THREAD_MULTIPLE the watchdog may not call MPI from its
  // thread: it then ends this process, and the launcher takes the job down. world_rank and
  // world_size let a rank of a two-rank job waiting for "the others" name the other one.
  Watchdog(double timeout_s, bool may_call_mpi, int world_rank = 0, int world_size = 1);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: restarts the clock and says what the rank is doing now. A rank that is only
  // waiting for the others gets twice the time, so when one rank is stuck, its own message
  // (naming what it was doing) comes first and the job ends on it.
  void kick(const std::string& doing, bool waiting_for_others = false);
  // No deadline until the next kick (e.g. while rank 0 writes results).
  void pause();
  // A blocking wait on other ranks' data (from the transports): the rank counts as waiting
  // (the longer deadline, counted from the wait's start) and a timeout names `peer`.
  void begin_wait(const char* what, int peer) override;
  void end_wait() override;

 private:
  void watch();
  using Clock = std::chrono::steady_clock;
  double timeout_s_;
  bool may_call_mpi_;
  int world_rank_, world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false, waiting_ = false;
  Clock::time_point last_;
  std::string doing_;
  const char* wait_what_ = nullptr;  // the blocking wait in progress, if any
  int wait_peer_ = -1;
  std::thread thread_;
};

}  // namespace suite

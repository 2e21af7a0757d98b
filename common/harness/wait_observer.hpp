// Told when this rank starts and stops a blocking wait on other ranks' data (a ring exchange,
// a collective). The watchdog implements it, so a rank frozen in its own work and a rank
// waiting for a frozen peer time out differently, and the waiting one names whom it waits for.
#pragma once

namespace suite {

class WaitObserver {
 public:
  virtual ~WaitObserver() = default;
  // `what`: a string literal ("ring exchange", "all-to-all"); `peer`: the world rank waited
  // for, or -1 for the other ranks of a group.
  virtual void begin_wait(const char* what, int peer) = 0;
  virtual void end_wait() = 0;
};

}  // namespace suite

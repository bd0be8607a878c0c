#pragma once
// A long command stops at its next safe point, keeping everything finished, when asked to:
// SIGINT (Ctrl-C), SIGTERM (scancel, a Slurm time limit, a container's stop) or SIGHUP (the
// terminal went away). While a StopSignals lives, those signals only set its flag; the previous
// handlers come back when it goes. The flag is process-wide, as signals are: one StopSignals at
// a time.
#include <atomic>

namespace prefetchlab::apps {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Set once a stop was asked for (the simulator's and the sweep's interrupt flag).
  static const std::atomic<bool>* flag();
  static bool requested() { return flag()->load(); }

 private:
  static constexpr int kSignals = 3;
  void (*previous_[kSignals])(int) = {};
};

}  // namespace prefetchlab::apps

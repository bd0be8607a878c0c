#pragma once
// The sweep's progress line (done/total, points/s, ETA) on stderr, redrawn in place — only when
// stderr is a terminal, so logs and pipes never see it.
#include <chrono>
#include <cstddef>

namespace prefetchlab::apps {

class SweepProgress {
 public:
  // `total` points are to run in this session.
  explicit SweepProgress(std::size_t total);
  // Called (serialised by the caller) after each finished point with the count so far.
  void update(std::size_t done);
  // Ends the line so later output starts on its own line.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  std::size_t total_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace prefetchlab::apps

#pragma once
// The sweep's progress line on stderr: done/total, points/s and ETA. On a terminal it is redrawn
// in place (at most 5 times a second); into a log or a pipe it is a whole line at the start, then
// at most one every `log_interval` and one at the end, so a batch job's log shows the rate
// without growing by a line per point.
#include <chrono>
#include <cstddef>
#include <cstdio>

namespace prefetchlab::apps {

class SweepProgress {
 public:
  // `total` points are to run in this session; lines go to `out` (stderr by default).
  explicit SweepProgress(std::size_t total, std::FILE* out = stderr,
                         std::chrono::seconds log_interval = std::chrono::seconds{30});
  // Called (serialised by the caller) after each finished point with the count so far.
  void update(std::size_t done);
  // Ends the line so later output starts on its own line.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void draw(std::size_t done, Clock::time_point now);
  std::FILE* out_;
  bool terminal_;
  std::size_t total_;
  std::chrono::steady_clock::duration interval_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace prefetchlab::apps

#include "sweep_progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace prefetchlab::apps {
namespace {

// Redrawing more often than this only costs time on a slow terminal.
constexpr std::chrono::milliseconds kRedrawInterval{200};

}  // namespace

SweepProgress::SweepProgress(std::size_t total)
    : enabled_(::isatty(STDERR_FILENO) == 1), total_(total), start_(Clock::now()), last_draw_(start_) {}

void SweepProgress::update(std::size_t done) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (done < total_ && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  const double eta_s = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
  std::fprintf(stderr, "\rsweep: %zu/%zu points, %.1f points/s, ETA %.0f s   ", done, total_, rate, eta_s);
  std::fflush(stderr);
  drawn_ = true;
}

void SweepProgress::finish() {
  if (!drawn_) return;
  std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace prefetchlab::apps

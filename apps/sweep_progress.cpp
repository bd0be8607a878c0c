#include "sweep_progress.hpp"

#include <unistd.h>

namespace prefetchlab::apps {
namespace {

// Redrawing more often than this only costs time on a slow terminal.
constexpr std::chrono::milliseconds kRedrawInterval{200};

}  // namespace

SweepProgress::SweepProgress(std::size_t total, std::FILE* out, std::chrono::seconds log_interval)
    : out_(out),
      terminal_(::isatty(::fileno(out)) == 1),
      total_(total),
      interval_(terminal_ ? Clock::duration(kRedrawInterval) : Clock::duration(log_interval)),
      start_(Clock::now()),
      last_draw_(start_) {
  if (total_ > 0) draw(0, start_);  // before the work: the count, and that the rate comes with the first point
}

void SweepProgress::update(std::size_t done) {
  const auto now = Clock::now();
  if (done < total_ && now - last_draw_ < interval_) return;
  draw(done, now);
}

void SweepProgress::draw(std::size_t done, Clock::time_point now) {
  last_draw_ = now;
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  // On a terminal: back to the line's start and clear it (ECMA-48 EL), so a shorter line
  // leaves nothing of the longer one before it.
  const char* begin = terminal_ ? "\r\033[K" : "";
  const char* end = terminal_ ? "" : "\n";
  if (done == 0) {
    std::fprintf(out_, "%ssweep: 0/%zu points, rate and ETA after the first point%s", begin, total_, end);
  } else {
    const double eta_s = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    std::fprintf(out_, "%ssweep: %zu/%zu points, %.1f points/s, ETA %.0f s%s", begin, done, total_, rate, eta_s,
                 end);
  }
  std::fflush(out_);
  drawn_ = terminal_;
}

void SweepProgress::finish() {
  if (!drawn_) return;
  std::fputc('\n', out_);
  drawn_ = false;
}

}  // namespace prefetchlab::apps

#include "stop_signals.hpp"

#include <csignal>

namespace prefetchlab::apps {
namespace {

// A signal handler can only reach a global; it does nothing but store to this lock-free flag.
std::atomic<bool> g_stop_requested{false};
extern "C" void on_stop_signal(int) { g_stop_requested.store(true); }

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

}  // namespace

StopSignals::StopSignals() {
  g_stop_requested.store(false);
  for (int i = 0; i < kSignals; ++i) previous_[i] = std::signal(kStopSignals[i], on_stop_signal);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < kSignals; ++i) std::signal(kStopSignals[i], previous_[i]);
}

const std::atomic<bool>* StopSignals::flag() { return &g_stop_requested; }

}  // namespace prefetchlab::apps

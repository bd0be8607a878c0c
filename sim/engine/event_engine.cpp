#include "sim/engine/event_engine.hpp"

#include <stdexcept>
#include <string>

namespace prefetchlab::sim {

void EventEngine::schedule_at(TimeNs time_ns, EventHandler& handler, std::int64_t tag) {
  // An event in the past would break causality; it is always a simulator bug.
  if (time_ns < now_ns_) {
    throw std::logic_error("event scheduled in the past: " + std::to_string(time_ns) + " < " +
                           std::to_string(now_ns_));
  }
  pending_.push(Event{time_ns, &handler, tag});
}

bool EventEngine::run_one() {
  if (pending_.empty()) return false;
  const Event event = pending_.pop();
  now_ns_ = event.time_ns;
  ++processed_;
  event.handler->on_event(event.tag);
  return true;
}

void EventEngine::run() {
  stopped_ = false;
  while (!stopped_ && run_one()) {
  }
}

}  // namespace prefetchlab::sim

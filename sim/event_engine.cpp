#include "event_engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace prefetchlab::sim {

void EventEngine::schedule_at(TimeNs time_ns, EventHandler& handler, std::int64_t tag) {
  // An event in the past would break causality; it is always a simulator bug.
  if (time_ns < now_ns_) {
    throw std::logic_error("event scheduled in the past: " + std::to_string(time_ns) + " < " +
                           std::to_string(now_ns_));
  }
  const Event event{time_ns, next_seq_++, &handler, tag};
  if (time_ns == now_ns_) {
    now_queue_.push_back(event);
    return;
  }
  heap_.push_back(event);
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

bool EventEngine::run_one() {
  Event event;
  if (!now_queue_.empty() && (heap_.empty() || Later{}(heap_.front(), now_queue_.front()))) {
    event = now_queue_.front();
    now_queue_.pop_front();
  } else if (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    event = heap_.back();
    heap_.pop_back();
  } else {
    return false;
  }
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

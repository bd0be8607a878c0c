#pragma once
// The discrete-event core: integer-nanosecond time, events ordered by (time, scheduling order)
// so that equal-time events run in the order they were scheduled and a run is a pure function
// of its inputs. Handlers are plain objects (no std::function, no allocation per event).
#include <cstdint>

#include "sim/monotone_event_queue.hpp"

namespace prefetchlab::sim {

using TimeNs = std::int64_t;

class EventHandler {
 public:
  // `tag` is whatever the scheduler passed: an op index, a state code.
  virtual void on_event(std::int64_t tag) = 0;

 protected:
  ~EventHandler() = default;
};

class EventEngine {
 public:
  void schedule_at(TimeNs time_ns, EventHandler& handler, std::int64_t tag = 0);
  void schedule_after(TimeNs delay_ns, EventHandler& handler, std::int64_t tag = 0) {
    schedule_at(now_ns_ + delay_ns, handler, tag);
  }

  TimeNs now_ns() const { return now_ns_; }
  bool empty() const { return pending_.empty(); }
  // The earliest pending event's time; there must be one.
  TimeNs next_time_ns() const { return pending_.min_time_ns(); }
  std::uint64_t events_processed() const { return processed_; }

  // Runs the earliest event; false when none is left.
  bool run_one();
  // Runs until no event is left or `stop()` is called from a handler.
  void run();
  void stop() { stopped_ = true; }
  void resume() { stopped_ = false; }  // after the caller has seen the stop
  bool stopped() const { return stopped_; }

 private:
  struct Event {
    TimeNs time_ns;
    EventHandler* handler;
    std::int64_t tag;
  };

  // Time never goes back, so a radix heap orders the pending events (see its header): cheaper
  // than a binary heap on (time, sequence), in the same order.
  MonotoneEventQueue<Event> pending_;
  TimeNs now_ns_ = 0;
  std::uint64_t processed_ = 0;
  bool stopped_ = false;
};

}  // namespace prefetchlab::sim

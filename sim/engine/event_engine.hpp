#pragma once
// The discrete-event core: integer-nanosecond time, events ordered by (time, scheduling order)
// so that equal-time events run in the order they were scheduled and a run is a pure function
// of its inputs. Handlers are plain objects (no std::function, no allocation per event).
#include <cstdint>
#include <climits>

#include "sim/engine/monotone_event_queue.hpp"

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
  // Spends `delay_ns` at once, without an event, where the event it would take could only run
  // next: nothing pending comes before it (nor at its time: that was scheduled first), it is
  // before the limit the run loop set, and no handler has stopped the engine. Then the clock
  // moves on, the event counts as processed, and the caller carries on as if it had been
  // resumed; otherwise nothing changes and the caller schedules the event.
  bool advance_inline(TimeNs delay_ns) {
    const TimeNs time_ns = now_ns_ + delay_ns;
    if (stopped_ || time_ns >= limit_ns_ || (!pending_.empty() && time_ns >= pending_.min_time_ns())) return false;
    now_ns_ = time_ns;
    ++processed_;
    return true;
  }
  // No event at or after `limit_ns` may run inline until the limit is set again (the run loop's
  // bound where ranks run apart; World::run_events). Scheduled events are not affected.
  void set_limit_ns(TimeNs limit_ns) { limit_ns_ = limit_ns; }
  void lower_limit_ns(TimeNs limit_ns) { limit_ns_ = limit_ns < limit_ns_ ? limit_ns : limit_ns_; }

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
  TimeNs limit_ns_ = INT64_MAX;
  std::uint64_t processed_ = 0;
  bool stopped_ = false;
};

}  // namespace prefetchlab::sim

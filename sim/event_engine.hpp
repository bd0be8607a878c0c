#pragma once
// The discrete-event core: integer-nanosecond time, events ordered by (time, sequence number)
// so that equal-time events run in the order they were scheduled and a run is a pure function
// of its inputs. Handlers are plain objects (no std::function, no allocation per event).
#include <cstdint>
#include <vector>

#include "sim/fifo_queue.hpp"

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
  bool empty() const { return heap_.empty() && now_queue_.empty(); }
  std::uint64_t events_processed() const { return processed_; }

  // Runs the earliest event; false when none is left.
  bool run_one();
  // Runs until no event is left or `stop()` is called from a handler.
  void run();
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

 private:
  struct Event {
    TimeNs time_ns;
    std::uint64_t seq;
    EventHandler* handler;
    std::int64_t tag;
  };
  // A function object, not a function pointer, so the heap algorithms inline the comparison.
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.seq > b.seq;
    }
  };

  std::vector<Event> heap_;  // binary min-heap on (time, seq)
  // Events scheduled for the current instant (a sixth of all: wake-ups, resumptions) skip the
  // heap: they are already in (time, seq) order, being scheduled at now with rising seq. The
  // earliest event is this queue's front or the heap's top, whichever is earlier.
  FifoQueue<Event> now_queue_;
  TimeNs now_ns_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
  bool stopped_ = false;
};

}  // namespace prefetchlab::sim

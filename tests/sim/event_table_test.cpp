// sim/ranks/device_stream.hpp's EventTable: a rank keeps the device events in flight, and the
// signalled times the world reads later (keep_time) until it drops them.
#include <gtest/gtest.h>

#include <stdexcept>

#include "sim/ranks/device_stream.hpp"
#include "sim/engine/event_engine.hpp"
#include "sim/engine/host_task.hpp"

namespace prefetchlab::sim {
namespace {

// Signals event `id` at `time_ns` (through the engine, as a stream would).
class Signaller final : public EventHandler {
 public:
  explicit Signaller(EventTable& events) : events_(events) {}
  void on_event(std::int64_t tag) override { events_.signal(static_cast<std::int32_t>(tag)); }

 private:
  EventTable& events_;
};

TEST(EventTable, ASignalledEventGoesOnceEveryOlderOneIsSignalledAndKeptTimesStay) {
  EventEngine engine;
  CoroutineResumer resumer;
  EventTable events(engine, resumer);
  Signaller signaller(events);
  const std::int32_t a = events.create();
  const std::int32_t b = events.create();
  events.keep_time(b);
  const std::int32_t c = events.create();
  EXPECT_EQ(events.live_events(), 3u);
  engine.schedule_at(10, signaller, b);  // b first: a, older, still holds the ring
  engine.run();
  EXPECT_EQ(events.live_events(), 3u);
  EXPECT_EQ(events.signaled_ns(b), 10);
  engine.schedule_at(20, signaller, a);  // a and b go; c, unsignalled, stays
  engine.run();
  EXPECT_EQ(events.live_events(), 1u);
  EXPECT_TRUE(events.signaled(a));
  EXPECT_TRUE(events.signaled(b));
  EXPECT_FALSE(events.signaled(c));
  EXPECT_EQ(events.signaled_ns(b), 10);            // kept past the event
  EXPECT_THROW(events.signaled_ns(a), std::logic_error);  // not kept: gone with its event
  EXPECT_EQ(events.signaled_ns(c), -1);
  events.forget_kept_before(c);
  EXPECT_THROW(events.signaled_ns(b), std::logic_error);
  EXPECT_THROW(events.keep_time(a), std::logic_error);  // kept times come in id order
}

}  // namespace
}  // namespace prefetchlab::sim

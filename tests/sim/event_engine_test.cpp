// The event engine's ordering contract: (time, sequence) order, causality, stop.
#include <gtest/gtest.h>

#include <vector>

#include "sim/engine/event_engine.hpp"

namespace ps = prefetchlab::sim;

namespace {

struct Recorder final : ps::EventHandler {
  ps::EventEngine* engine = nullptr;
  std::vector<std::pair<ps::TimeNs, std::int64_t>> seen;
  void on_event(std::int64_t tag) override { seen.emplace_back(engine->now_ns(), tag); }
};

}  // namespace

TEST(EventEngine, RunsInTimeThenSchedulingOrder) {
  ps::EventEngine engine;
  Recorder r;
  r.engine = &engine;
  engine.schedule_at(30, r, 1);
  engine.schedule_at(10, r, 2);
  engine.schedule_at(30, r, 3);  // same time as tag 1, scheduled later -> runs after it
  engine.schedule_at(10, r, 4);
  engine.run();
  const std::vector<std::pair<ps::TimeNs, std::int64_t>> expected{{10, 2}, {10, 4}, {30, 1}, {30, 3}};
  EXPECT_EQ(r.seen, expected);
  EXPECT_EQ(engine.events_processed(), 4u);
  EXPECT_EQ(engine.now_ns(), 30);
}

TEST(EventEngine, RejectsEventsInThePast) {
  ps::EventEngine engine;
  Recorder r;
  r.engine = &engine;
  engine.schedule_at(100, r);
  engine.run();
  EXPECT_THROW(engine.schedule_at(99, r), std::logic_error);
  EXPECT_NO_THROW(engine.schedule_after(0, r));
}

TEST(EventEngine, StopLeavesRemainingEventsQueued) {
  struct Stopper final : ps::EventHandler {
    ps::EventEngine* engine = nullptr;
    int calls = 0;
    void on_event(std::int64_t) override {
      if (++calls == 2) engine->stop();
    }
  } s;
  ps::EventEngine engine;
  s.engine = &engine;
  for (int i = 0; i < 5; ++i) engine.schedule_at(i, s);
  engine.run();
  EXPECT_EQ(s.calls, 2);
  EXPECT_FALSE(engine.empty());
  engine.run();
  EXPECT_EQ(s.calls, 5);
}

// A host step spends its time without an event only where that event would have run next: before
// every pending event (an equal time was scheduled first and runs first), before the run loop's
// limit, and not once a handler stopped the engine. It still counts as an event processed.
TEST(EventEngine, AdvanceInlineOnlyWhereItsEventWouldRunNext) {
  ps::EventEngine engine;
  Recorder r;
  r.engine = &engine;
  engine.schedule_at(100, r, 1);
  EXPECT_TRUE(engine.advance_inline(40));  // 40 < 100
  EXPECT_EQ(engine.now_ns(), 40);
  EXPECT_EQ(engine.events_processed(), 1u);
  EXPECT_FALSE(engine.advance_inline(60));  // 100: the pending event was scheduled first
  EXPECT_EQ(engine.now_ns(), 40);
  EXPECT_TRUE(engine.advance_inline(59));
  engine.set_limit_ns(120);
  engine.run_one();  // the event at 100
  EXPECT_FALSE(engine.advance_inline(20));  // at the limit
  EXPECT_TRUE(engine.advance_inline(19));
  engine.lower_limit_ns(200);  // lowers only
  EXPECT_FALSE(engine.advance_inline(1));
  engine.set_limit_ns(INT64_MAX);
  engine.stop();
  EXPECT_FALSE(engine.advance_inline(1));
  EXPECT_EQ(engine.now_ns(), 119);
  EXPECT_EQ(engine.events_processed(), 4u);  // two steps inline, one event, one more step
}

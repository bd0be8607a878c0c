// The event engine's ordering contract: (time, sequence) order, causality, stop.
#include <gtest/gtest.h>

#include <vector>

#include "sim/event_engine.hpp"

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

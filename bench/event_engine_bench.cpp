// Events per second of the engine alone: the classic "hold" model — a fixed population of
// pending events, each handler re-scheduling itself a pseudo-random delay ahead.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "sim/engine/event_engine.hpp"

namespace {

struct Holder final : prefetchlab::sim::EventHandler {
  prefetchlab::sim::EventEngine* engine = nullptr;
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;
  std::int64_t remaining = 0;
  void on_event(std::int64_t) override {
    if (--remaining <= 0) return;
    state ^= state << 13;  // xorshift: cheap, deterministic delays
    state ^= state >> 7;
    state ^= state << 17;
    engine->schedule_after(static_cast<std::int64_t>(state % 10'000), *this);
  }
};

void BM_EngineHold(benchmark::State& state) {
  const auto population = static_cast<std::size_t>(state.range(0));
  constexpr std::int64_t kEventsPerHolder = 1000;
  std::uint64_t total = 0;
  for (auto _ : state) {
    prefetchlab::sim::EventEngine engine;
    std::vector<Holder> holders(population);
    for (std::size_t i = 0; i < population; ++i) {
      holders[i].engine = &engine;
      holders[i].state += i;
      holders[i].remaining = kEventsPerHolder;
      engine.schedule_at(static_cast<std::int64_t>(i), holders[i]);
    }
    engine.run();
    total += engine.events_processed();
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(total), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineHold)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

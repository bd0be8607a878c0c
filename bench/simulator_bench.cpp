// Events per second of whole simulations: the default scenario (Llama-2-7B on 8x H100, 12
// iterations) and a latency-bound 32-rank one, without trace recording (a run's own cost).
// Issue target: >= 5 million events per second on one core; quote alongside event_engine_bench.
#include <benchmark/benchmark.h>

#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"

namespace {

void run_scenario(benchmark::State& state, const char* file, bool trace,
                  prefetchlab::sim::RankSimulation ranks = prefetchlab::sim::RankSimulation::kEveryRank) {
  const auto scenario =
      prefetchlab::core::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/" + file, {},
                                       prefetchlab::core::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  std::uint64_t events = 0;
  for (auto _ : state) {
    prefetchlab::sim::World world(scenario, trace, ranks);
    const auto result = world.run();
    events += result.events_processed;
    benchmark::DoNotOptimize(result.metrics.iterations.data());
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events_per_run"] =
      benchmark::Counter(static_cast<double>(events) / static_cast<double>(state.iterations()));
}

void BM_DefaultScenario(benchmark::State& state) { run_scenario(state, "default.yaml", false); }
void BM_DefaultScenarioWithTrace(benchmark::State& state) { run_scenario(state, "default.yaml", true); }
void BM_Gpt2Medium32Ranks(benchmark::State& state) { run_scenario(state, "gpt2-medium-4-nodes.yaml", false); }
// The same run as `prefetchlab run` does it: its 32 identical ranks simulated once.
void BM_Gpt2Medium32RanksCollapsed(benchmark::State& state) {
  run_scenario(state, "gpt2-medium-4-nodes.yaml", false, prefetchlab::sim::RankSimulation::kCollapseIdentical);
}

BENCHMARK(BM_DefaultScenario)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DefaultScenarioWithTrace)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt2Medium32Ranks)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gpt2Medium32RanksCollapsed)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

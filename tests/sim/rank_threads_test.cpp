// Ranks apart on several threads (sim::World::set_threads) write the bytes of one thread: the
// threads only run ranks between the points where ranks meet, and what ranks share (counting
// arrivals, starting collectives, finishing iterations, stops) happens between sweeps. Small
// runs, so that the TSan job (tests/sanitize.sh) runs them too; tests/sim/rank_order_test.cpp
// compares every bundled scenario with one time-ordered queue.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/world_run_files.hpp"

namespace fs = std::filesystem;
namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
using prefetchlab::testing::TempDir;
using prefetchlab::testing::world_run_files;

namespace {

pc::Scenario noisy(const std::string& name, std::vector<std::string> overrides) {
  overrides.insert(overrides.end(), {"noise.compute_jitter=0.03", "noise.host_jitter=0.05"});
  return pc::load_scenario(fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / name, overrides,
                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

void expect_same_bytes_on_any_thread_count(const pc::Scenario& scenario, const std::string& status) {
  const TempDir dir("rank-threads");
  const auto one = world_run_files(scenario, ps::RankSimulation::kEveryRank, dir.path() / "1",
                                   ps::EventOrder::kRankByRank, 1);
  ASSERT_NE(one.summary.find("\"status\": \"" + status + "\""), std::string::npos) << one.summary;
  for (const int threads : {2, 3, 8}) {
    const auto many = world_run_files(scenario, ps::RankSimulation::kEveryRank,
                                      dir.path() / std::to_string(threads), ps::EventOrder::kRankByRank, threads);
    EXPECT_EQ(one.iterations, many.iterations) << threads << " threads";
    EXPECT_EQ(one.buckets, many.buckets) << threads << " threads";
    EXPECT_EQ(one.summary, many.summary) << threads << " threads";
    EXPECT_EQ(one.samples, many.samples) << threads << " threads";
    EXPECT_EQ(one.memory, many.memory) << threads << " threads";
    EXPECT_EQ(one.events, many.events) << threads << " threads";  // the same events, not just figures
  }
}

}  // namespace

TEST(RankThreads, EightNoisyRanksGiveTheSameBytesOnAnyThreadCount) {
  expect_same_bytes_on_any_thread_count(noisy("default.yaml", {"training.iterations=3", "training.warmup_iterations=1"}),
                                        "ok");
}

TEST(RankThreads, AnOutOfMemoryStopsTheSameWayOnAnyThreadCount) {
  expect_same_bytes_on_any_thread_count(noisy("defects/oom-large-bucket.yaml", {"training.iterations=3"}),
                                        "oom");
}

TEST(RankThreads, ACollectiveMismatchStopsTheSameWayOnAnyThreadCount) {
  expect_same_bytes_on_any_thread_count(noisy("defects/rank-divergent-control-flow.yaml", {"training.iterations=5"}),
                                        "collective_mismatch");
}

TEST(RankThreads, AnInterruptStopsEveryThread) {
  const pc::Scenario scenario = noisy("default.yaml", {"training.iterations=50"});
  ps::World world(scenario, false);
  world.set_threads(2);
  ASSERT_TRUE(world.ranks_apart());
  const std::atomic<bool> interrupt{true};
  const ps::WorldResult result = world.run({}, &interrupt);
  EXPECT_EQ(result.status, pc::RunStatus::kInterrupted);
  EXPECT_LT(result.metrics.iterations.size(), 50u);
}

// Each rank records its own spans, so a traced run runs on threads too and keeps the same spans
// in the same order.
TEST(RankThreads, ATraceHoldsTheSameSpansOnAnyThreadCount) {
  const pc::Scenario scenario = noisy("default.yaml", {"training.iterations=2", "training.warmup_iterations=1"});
  const auto spans_on = [&](int threads) {
    ps::World world(scenario, /*record_trace=*/true);
    world.set_threads(threads);
    EXPECT_EQ(world.run().status, pc::RunStatus::kOk);
    std::string spans;
    world.trace().for_each_span([&](const ps::TraceSpan& span) {
      spans += std::to_string(span.rank) + ' ' + std::to_string(static_cast<int>(span.track)) + ' ' +
               std::to_string(span.start_ns) + ' ' + std::to_string(span.duration_ns) + ' ' +
               std::to_string(span.label) + '\n';
    });
    return spans;
  };
  const std::string one = spans_on(1);
  EXPECT_GT(one.size(), 1000u);
  EXPECT_EQ(one, spans_on(3));
}

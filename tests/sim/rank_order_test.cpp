// Ranks run apart (sim::EventOrder::kRankByRank: each rank alone up to the start of the
// collective it waits in) give the figures of every rank's events in one time-ordered queue:
// on every bundled scenario, as bundled and with per-rank noise, including the ones that stop
// early (out of memory, a collective mismatch, a hang); on three threads.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/input/input_error.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/world_run_files.hpp"

namespace fs = std::filesystem;
namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
using prefetchlab::testing::TempDir;
using prefetchlab::testing::world_run_files;

TEST(RankOrder, RanksRunApartGiveTheFiguresOfOneQueueOnEveryBundledScenario) {
  const TempDir dir("rank-order");
  const auto bundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);
  std::set<std::string> apart, stopped;
  int runs = 0;
  for (const fs::path& file : prefetchlab::testing::bundled_scenario_files()) {
    // As bundled, and with every rank different (compute and host noise), 4 iterations.
    for (const bool noisy : {false, true}) {
      std::vector<std::string> overrides = {"training.iterations=4", "training.warmup_iterations=1"};
      if (noisy) overrides.insert(overrides.end(), {"noise.compute_jitter=0.03", "noise.host_jitter=0.05"});
      std::optional<pc::Scenario> scenario;
      try {
        scenario = pc::load_scenario(file, overrides, bundled);
      } catch (const pc::InputError&) {
        continue;  // a scenario that is bad input on purpose, or takes no noise
      }
      const std::string where = file.filename().string() + (noisy ? " with noise" : "");
      const fs::path out = dir.path() / (file.stem().string() + (noisy ? "-noisy" : ""));
      const ps::World probe(*scenario, false, ps::RankSimulation::kEveryRank, ps::EventOrder::kRankByRank);
      if (!probe.ranks_apart()) continue;  // one rank, or ranks sharing cores: one queue either way
      const auto one_queue = world_run_files(*scenario, ps::RankSimulation::kEveryRank, out / "global",
                                             ps::EventOrder::kGlobal);
      // On three threads, blocks of uneven size (one thread gives the same bytes:
      // tests/sim/rank_threads_test.cpp).
      const auto rank_by_rank = world_run_files(*scenario, ps::RankSimulation::kEveryRank, out / "apart",
                                                ps::EventOrder::kRankByRank, 3);
      EXPECT_EQ(one_queue.iterations, rank_by_rank.iterations) << where;
      EXPECT_EQ(one_queue.buckets, rank_by_rank.buckets) << where;
      EXPECT_EQ(one_queue.summary, rank_by_rank.summary) << where;
      EXPECT_EQ(one_queue.samples, rank_by_rank.samples) << where;
      EXPECT_EQ(one_queue.memory, rank_by_rank.memory) << where;
      apart.insert(where);
      if (one_queue.summary.find("\"status\": \"ok\"") == std::string::npos) stopped.insert(where);
      ++runs;
    }
  }
  // Runs that stop early are among them: the others run up to the stop, not past it.
  for (const char* name : {"oom-large-bucket.yaml", "oom-large-bucket.yaml with noise",
                           "rank-divergent-control-flow.yaml", "rank-divergent-control-flow.yaml with noise"}) {
    EXPECT_TRUE(stopped.contains(name)) << name << " did not stop early rank by rank";
  }
  EXPECT_GE(runs, 20);
}

TEST(RankOrder, RanksThatShareCoresRunInOneQueue) {
  const auto bundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);
  const fs::path file = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "default.yaml";
  const pc::Scenario noisy = pc::load_scenario(file, {"noise.compute_jitter=0.03"}, bundled);
  EXPECT_TRUE(ps::World(noisy, false).ranks_apart());
  EXPECT_FALSE(ps::World(noisy, false, ps::RankSimulation::kEveryRank, ps::EventOrder::kGlobal).ranks_apart());
  const pc::Scenario shared = pc::load_scenario(
      file, {"noise.compute_jitter=0.03", "cluster.calibration.contention_model=shared_cores", "cluster.calibration.shared_cores=16"},
      bundled);
  EXPECT_FALSE(ps::World(shared, false).ranks_apart());
}

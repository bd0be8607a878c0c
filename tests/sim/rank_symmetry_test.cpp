// Identical ranks simulated once (sim/ranks/rank_symmetry.hpp): on every bundled scenario that
// qualifies, at 8, 16 and 64 ranks, the collapsed run's iterations.csv, buckets.csv and summary
// figures are byte for byte the full simulation's; what breaks the symmetry falls back and says
// why; and the command line marks both in summary.json and labels the representative.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/input/input_error.hpp"
#include "core/metrics/metrics_csv.hpp"
#include "core/metrics/summary_json.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/scenario_json.hpp"
#include "sim/ranks/rank_symmetry.hpp"
#include "sim/ranks/world.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/world_run_files.hpp"

namespace fs = std::filesystem;
namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kRoot = PREFETCHLAB_SOURCE_DIR;

const auto& read_file = prefetchlab::testing::read_whole_file;
const auto& bundled_scenarios = prefetchlab::testing::bundled_scenario_files;
using RunFiles = prefetchlab::testing::WorldRunFiles;

RunFiles run_files(const pc::Scenario& scenario, ps::RankSimulation mode, const fs::path& dir) {
  return prefetchlab::testing::world_run_files(scenario, mode, dir);
}

}  // namespace

TEST(RankSymmetry, CollapsedRunsEqualTheFullSimulationOnEveryBundledScenarioThatQualifies) {
  const TempDir dir("rank-symmetry");
  const auto bundled = pc::BundledData::from_root(kRoot);
  std::set<std::string> compared, fell_back;
  int runs = 0;
  for (const fs::path& file : bundled_scenarios()) {
    const pc::Scenario own = pc::load_scenario(file, {}, bundled);
    const std::int64_t per_node = own.cluster.gpus_per_node;
    for (const std::int64_t world : {8, 16, 64}) {
      // The scenario's own node size where its profile reaches that many nodes, else full
      // nodes of 8, else the same with a network across the nodes (the profile's defaults).
      std::vector<std::vector<std::string>> clusters;
      if (world % per_node == 0) clusters.push_back({"cluster.nodes=" + std::to_string(world / per_node)});
      clusters.push_back({"cluster.gpus_per_node=8", "cluster.nodes=" + std::to_string(world / 8)});
      if (world % per_node == 0) {
        clusters.push_back({"cluster.nodes=" + std::to_string(world / per_node), "cluster.network={}"});
      }
      clusters.push_back({"cluster.gpus_per_node=8", "cluster.nodes=" + std::to_string(world / 8), "cluster.network={}"});
      std::optional<pc::Scenario> loaded;
      for (auto overrides : clusters) {
        // Short runs: 6 iterations (the adaptive controllers' trace, record and first moves;
        // gpt2-small-divergence's divergence in iteration 5).
        overrides.insert(overrides.end(), {"training.iterations=6", "training.warmup_iterations=1"});
        try {
          loaded = pc::load_scenario(file, overrides, bundled);
          break;
        } catch (const pc::InputError&) {
          // this hardware profile has no such cluster: try the next form
        }
      }
      if (!loaded) continue;
      const pc::Scenario& scenario = *loaded;
      const ps::RankCollapse plan = ps::plan_rank_collapse(scenario, ps::RankSimulation::kCollapseIdentical);
      const std::string where = file.filename().string() + " at " + std::to_string(world) + " ranks";
      if (!plan.collapsed()) {
        EXPECT_FALSE(plan.full_because.empty()) << where;
        fell_back.insert(file.filename().string());
        continue;
      }
      EXPECT_EQ(plan.text(), "1 of " + std::to_string(world)) << where;
      const fs::path out = dir.path() / (file.stem().string() + "-" + std::to_string(world));
      const RunFiles collapsed = run_files(scenario, ps::RankSimulation::kCollapseIdentical, out / "collapsed");
      const RunFiles full = run_files(scenario, ps::RankSimulation::kEveryRank, out / "full");
      EXPECT_EQ(collapsed.iterations, full.iterations) << where;
      EXPECT_EQ(collapsed.buckets, full.buckets) << where;
      EXPECT_EQ(collapsed.summary, full.summary) << where;
      // The representative's samples and memory timeline, once for each rank it stands for.
      EXPECT_EQ(collapsed.samples, full.samples) << where;
      EXPECT_EQ(collapsed.memory, full.memory) << where;
      // A bucket row per rank of the job, not per simulated rank.
      const auto rows = [](const std::string& text) { return std::count(text.begin(), text.end(), '\n') - 1; };
      EXPECT_EQ(rows(collapsed.buckets), rows(collapsed.iterations) * world) << where;
      compared.insert(file.filename().string());
      ++runs;
    }
  }
  // The scenarios that qualify today, each at every size its hardware allows.
  for (const char* name : {"default.yaml", "gpt2-medium-4-nodes.yaml", "gpt2-medium-8-nodes-memory-budget.yaml",
                           "gpt2-small-divergence.yaml", "llama-2-13b-grad-accum.yaml", "llama-2-13b-variable-seq-len.yaml",
                           "tiny-llama-2x-h100.yaml", "b-host-timers.yaml", "oom-large-bucket.yaml"}) {
    EXPECT_TRUE(compared.contains(name)) << name << " was not compared collapsed against full";
  }
  // (a-agreement-none and pr8431-original run on two GPUs of a profile without a network: no
  // 8-rank form of them exists.)
  for (const char* name : {"rank-divergent-control-flow.yaml", "mixtral-8x7b-2-nodes.yaml", "gpt2-medium-2-nodes.yaml",
                           "gpt2-xl-4x-l40s-pcie.yaml"}) {
    EXPECT_TRUE(fell_back.contains(name)) << name << " should have fallen back to every rank";
  }
  EXPECT_GE(runs, 20);
}

TEST(RankSymmetry, WhatTellsRanksApartFallsBackAndSaysWhy) {
  const auto bundled = pc::BundledData::from_root(kRoot);
  const fs::path file = kRoot / "scenarios" / "default.yaml";
  const auto because = [&](const std::vector<std::string>& overrides) {
    const pc::Scenario scenario = pc::load_scenario(file, overrides, bundled);
    const ps::RankCollapse plan = ps::plan_rank_collapse(scenario, ps::RankSimulation::kCollapseIdentical);
    EXPECT_EQ(plan.collapsed(), plan.full_because.empty());
    return plan.full_because;
  };
  EXPECT_EQ(because({}), "");
  EXPECT_NE(because({"noise.compute_jitter=0.05"}).find("noise.compute_jitter"), std::string::npos);
  EXPECT_NE(because({"noise.host_jitter=0.05"}).find("noise.host_jitter"), std::string::npos);
  EXPECT_NE(because({"noise.host_timer_noise_us=0.2"}).find("noise.host_timer_noise_us"), std::string::npos);
  EXPECT_NE(because({"noise.slow_ranks={3: 1.1}"}).find("makes rank 3 slower"), std::string::npos);
  EXPECT_NE(because({"cluster.calibration.contention_model=shared_cores", "cluster.calibration.shared_cores=16"}).find("shared_cores"), std::string::npos);
  // Divergence on every rank keeps them identical; on some, it does not.
  EXPECT_EQ(because({"divergence=[{iteration: 3, skip: [model.layers.1]}]"}), "");
  EXPECT_NE(because({"divergence=[{iteration: 3, skip: [model.layers.1], ranks: [2]}]"}).find("some ranks only"),
            std::string::npos);
  // A caller that reads each rank gets every rank.
  const pc::Scenario scenario = pc::load_scenario(file, {}, bundled);
  const ps::RankCollapse every = ps::plan_rank_collapse(scenario, ps::RankSimulation::kEveryRank);
  EXPECT_EQ(every.text(), "8 of 8");
  EXPECT_NE(every.full_because.find("every rank was asked for"), std::string::npos);
}

// The command line: summary.json and the terminal say how many ranks ran; the timelines hold the
// representative, labelled with the ranks it stands for; --every-rank and --kineto-trace simulate
// each rank.
TEST(RankSymmetry, TheRunMarksTheCollapseAndLabelsTheRepresentative) {
  const TempDir dir("rank-symmetry-cli");
  const std::string scenario = (kRoot / "scenarios" / "default.yaml").string();
  const std::string common = " --set training.iterations=4 --set training.warmup_iterations=1 --no-expect -o ";
  const auto collapsed = run_cli("run " + scenario + common + (dir.path() / "c").string());
  ASSERT_EQ(collapsed.exit_code, 0) << collapsed.output;
  EXPECT_NE(collapsed.output.find("ranks simulated:     1 of 8 (identical ranks: one simulated for all)"), std::string::npos)
      << collapsed.output;
  const auto full = run_cli("run " + scenario + common + (dir.path() / "f").string() + " --every-rank");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_NE(full.output.find("ranks simulated:     8 of 8 (every rank: every rank was asked for"), std::string::npos)
      << full.output;
  for (const char* file : {"iterations.csv", "buckets.csv"}) {
    EXPECT_EQ(read_file(dir.path() / "c" / file), read_file(dir.path() / "f" / file)) << file;
  }
  auto summary_c = nlohmann::json::parse(read_file(dir.path() / "c" / "summary.json"));
  auto summary_f = nlohmann::json::parse(read_file(dir.path() / "f" / "summary.json"));
  EXPECT_EQ(summary_c["ranks_simulated"], "1 of 8");
  EXPECT_FALSE(summary_c.contains("every_rank_simulated_because"));
  EXPECT_EQ(summary_f["ranks_simulated"], "8 of 8");
  summary_f.erase("ranks_simulated");
  summary_f.erase("every_rank_simulated_because");
  summary_c.erase("ranks_simulated");
  EXPECT_EQ(summary_c, summary_f);
  // samples.csv and memory.csv: the representative's rows for each rank it stands for, the
  // full simulation's bytes; the trace holds rank 0, named for all eight.
  for (const char* file : {"samples.csv", "memory.csv"}) {
    EXPECT_EQ(read_file(dir.path() / "c" / file), read_file(dir.path() / "f" / file)) << file;
  }
  EXPECT_NE(read_file(dir.path() / "c" / "samples.csv").find("\n1,7,"), std::string::npos);
  const std::string trace = read_file(dir.path() / "c" / "trace.json");
  EXPECT_NE(trace.find("rank 0 (stands for ranks 0-7: identical ranks simulated once)"), std::string::npos);
  // Asking for rank 5's timelines: the representative is simulated with its timelines, and
  // its rows are rank 5's.
  const auto rank5 = run_cli("run " + scenario + common + (dir.path() / "r5").string() + " --set output.trace_ranks=[5]");
  ASSERT_EQ(rank5.exit_code, 0) << rank5.output;
  const auto rank5_full = run_cli("run " + scenario + common + (dir.path() / "r5f").string() +
                                  " --set output.trace_ranks=[5] --every-rank");
  ASSERT_EQ(rank5_full.exit_code, 0) << rank5_full.output;
  for (const char* file : {"samples.csv", "memory.csv"}) {
    const std::string rows = read_file(dir.path() / "r5" / file);
    EXPECT_EQ(rows, read_file(dir.path() / "r5f" / file)) << file;
    EXPECT_EQ(rows.find("\n1,0,"), std::string::npos) << file;
  }
  EXPECT_NE(read_file(dir.path() / "r5" / "samples.csv").find("\n1,5,"), std::string::npos);
  // Per-rank kineto traces need every rank.
  const auto kineto = run_cli("run " + scenario + common + (dir.path() / "k").string() + " --kineto-trace " +
                              (dir.path() / "kineto").string());
  ASSERT_EQ(kineto.exit_code, 0) << kineto.output;
  EXPECT_NE(kineto.output.find("ranks simulated:     8 of 8"), std::string::npos) << kineto.output;
  EXPECT_TRUE(fs::exists(dir.path() / "kineto" / "rank7.pt.trace.json"));
}

// The controller runs inside the simulator exactly as `replay` drives it: a run's own
// samples.csv, replayed through the scenario's controller, reproduces that run's buckets.csv
// byte for byte, for every policy (issue "Controller core", done-when 2).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The PR #8431 benchmark setting with 30 iterations (three ema_threshold update points) and the
// policy under test; some jitter so that ranks measure different things.
std::string scenario(const std::string& policy) {
  return "model: bert-base-qa\n"
         "training: {micro_batch: 2, seq_len: 256, iterations: 30, warmup_iterations: 2}\n"
         "cluster: {hardware: rtx4000ada-2x-pcie4}\n"
         "noise: {seed: 5, compute_jitter: 0.03, host_timer_noise_us: 5}\n"
         "output: {trace: false}\n"
         "controller: {policy: " + policy + "}\n";
}

}  // namespace

TEST(ControllerReplay, ReplayOfARunsSamplesReproducesItsBuckets) {
  for (const char* policy : {"static", "deepspeed_pr8431", "ema_threshold", "pace_search"}) {
    TempDir dir("replay");
    const auto file = dir.write("s.yaml", scenario(policy));
    const auto run = run_cli("run " + file.string() + " -o " + (dir.path() / "out").string());
    // (The original PR decides on each rank alone, but here both ranks' host timers keep the
    // bucket at its maximum, so they never disagree: scenarios/defects/pr8431-original.yaml.)
    const int expected_exit = 0;
    ASSERT_EQ(run.exit_code, expected_exit) << policy << "\n" << run.output;
    const auto replay = run_cli("replay --scenario " + file.string() + " --samples " +
                                (dir.path() / "out" / "samples.csv").string() + " -o " +
                                (dir.path() / "replayed.csv").string());
    ASSERT_EQ(replay.exit_code, 0) << policy << "\n" << replay.output;
    const std::string buckets = read_file(dir.path() / "out" / "buckets.csv");
    EXPECT_EQ(read_file(dir.path() / "replayed.csv"), buckets) << policy;
    if (std::string(policy) != "static") {
      // The policy did something: the bucket is not the same in every row.
      std::istringstream rows(buckets);
      std::string header, row;
      std::getline(rows, header);
      std::set<std::string> values;
      while (std::getline(rows, row)) values.insert(row.substr(row.rfind(',') + 1));
      EXPECT_GT(values.size(), 1u) << policy << " never changed the bucket";
    }
  }
}

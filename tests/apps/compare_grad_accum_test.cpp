// `compare` ranks configurations by the time of an optimizer step: with grad_accum 2 its steady
// step is two micro-batches (the optimizer step included), as `run` reports it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

TEST(CompareCommand, GradientAccumulationComparesOptimizerSteps) {
  TempDir dir("compare-grad-accum");
  const auto scenario = dir.path() / "ga.yaml";
  std::ofstream(scenario) << "model: tiny-llama\n"
                          << "training: {micro_batch: 2, seq_len: 256, iterations: 8, warmup_iterations: 2, grad_accum: 2}\n"
                          << "cluster: {hardware: h100-sxm-8x, gpus_per_node: 2}\n"
                          << "zero: {stage3_prefetch_bucket_size: 1e5, stage3_param_persistence_threshold: 1000}\n";
  const auto run = run_cli("run " + scenario.string() + " -o " + (dir.path() / "run").string() + " --set output.trace=false");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(dir.path() / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  const double micro_ms = summary["steady_micro_batch_time_ns"].get<double>() / 1e6;
  const double step_ms = summary["steady_step_time_ns"].get<double>() / 1e6;
  EXPECT_GT(step_ms, 1.5 * micro_ms);  // two micro-batches, one with the optimizer step

  const auto compare = run_cli("compare " + scenario.string() + " -j 1 --policies ema_threshold");
  ASSERT_EQ(compare.exit_code, 0) << compare.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(compare.output, m, std::regex(R"(\| ga \| DeepSpeed default[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \|)")))
      << compare.output;
  const double compared_ms = std::stod(m[1]);
  // compare takes the median over the last half of the steps: within a few percent of run's.
  EXPECT_NEAR(compared_ms, step_ms, 0.1 * step_ms) << compare.output;
  EXPECT_GT(compared_ms, 1.5 * micro_ms) << compare.output;
}

// A simulated run written in the torch.profiler (Kineto) schema goes through the same reader as
// a real trace: calibrate --from-trace recovers the collective latency and bandwidth the run was
// simulated with (the ring model, contention off, so a collective's time is exactly
// latency + f * S / busBW).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::TempDir;

TEST(KinetoTraceLoop, CalibrateFromASimulatedTraceRecoversItsCollectiveCosts) {
  TempDir dir("kineto-loop");
  const std::string kineto = (dir.path() / "kineto").string();
  const auto run = prefetchlab::testing::run_cli(
      "run " PREFETCHLAB_SOURCE_DIR "/scenarios/tiny-llama-2x-h100.yaml --no-expect -o " + (dir.path() / "out").string() +
      " --kineto-trace " + kineto +
      " --set cluster.calibration.collective_model=ring --set cluster.calibration.collective_latency_us=30"
      " --set cluster.calibration.allgather_bus_bandwidth_gb_per_s=100"
      " --set cluster.calibration.contention_collective_factor=0");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(std::filesystem::exists(kineto + "/rank0.pt.trace.json"));
  ASSERT_TRUE(std::filesystem::exists(kineto + "/rank1.pt.trace.json"));

  const auto summary = prefetchlab::testing::run_cli("trace-summary " + kineto + "/rank0.pt.trace.json " + kineto +
                                                     "/rank1.pt.trace.json");
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_NE(summary.output.find("trace-summary: 2 ranks"), std::string::npos) << summary.output;

  const std::string fitted = (dir.path() / "fitted.yaml").string();
  const auto calibrate = prefetchlab::testing::run_cli("calibrate -o " + fitted + " --from-trace " + kineto +
                                                       "/rank0.pt.trace.json " + kineto + "/rank1.pt.trace.json");
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.output;
  const YAML::Node calibration = YAML::LoadFile(fitted)["calibration"];
  EXPECT_NEAR(calibration["collective_latency_us"].as<double>(), 30.0, 3.0) << calibrate.output;
  EXPECT_NEAR(calibration["allgather_bus_bandwidth_gb_per_s"].as<double>(), 100.0, 10.0) << calibrate.output;
}

// A simulated run written in the torch.profiler (Kineto) schema goes through the same reader as
// a real trace: calibrate --from-trace recovers the collective latency and bandwidth the run was
// simulated with (the ring model, contention off, so a collective's time is exactly
// latency + f * S / busBW).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
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

// validate --against-trace on the scenario's own simulated run: every figure agrees; with
// another prefetch bucket the first diverging all-gather is named.
TEST(KinetoTraceLoop, ValidateAgainstTheScenariosOwnTraceAgreesAndNamesAMismatch) {
  TempDir dir("kineto-validate");
  const std::string scenario = PREFETCHLAB_SOURCE_DIR "/scenarios/tiny-llama-2x-h100.yaml";
  const std::string kineto = (dir.path() / "kineto").string();
  const auto run = prefetchlab::testing::run_cli("run " + scenario + " --no-expect -o " + (dir.path() / "out").string() +
                                                 " --kineto-trace " + kineto);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string traces = " --against-trace " + kineto + "/rank0.pt.trace.json " + kineto + "/rank1.pt.trace.json";
  const auto same = prefetchlab::testing::run_cli("validate " + scenario + traces + " -o " + (dir.path() / "v").string());
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("gathers: every step's all-gather sequence matches the scenario's"), std::string::npos)
      << same.output;
  std::ifstream summary(dir.path() / "v" / "validate_summary.csv");
  std::string line;
  int rows = 0;
  while (std::getline(summary, line)) {
    if (line.rfind("metric,", 0) == 0 || line.rfind("peak_allocated_bytes,", 0) == 0) continue;
    ++rows;
    // metric,real,simulated,error,...: the same run on both sides; the real median runs over all
    // the trace's steps, the simulated one over the steady steps: error within 0.1%.
    const auto first = line.find(',');
    const auto second = line.find(',', first + 1);
    const auto third = line.find(',', second + 1);
    const auto fourth = line.find(',', third + 1);
    EXPECT_NEAR(std::stod(line.substr(third + 1, fourth - third - 1)), 0.0, 1e-3) << line;
  }
  EXPECT_EQ(rows, 7);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "v" / "validate.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "v" / "simulated_kineto" / "rank0.pt.trace.json"));

  const auto other = prefetchlab::testing::run_cli("validate " + scenario + traces + " -o " + (dir.path() / "w").string() +
                                                   " --set zero.stage3_prefetch_bucket_size=1000");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("gathers do not match: all-gather #"), std::string::npos) << other.output;

  const auto neither = prefetchlab::testing::run_cli("validate " + scenario);
  EXPECT_EQ(neither.exit_code, 2) << neither.output;
  EXPECT_NE(neither.output.find("neither is given"), std::string::npos) << neither.output;
}

// The whole loop on the host device: validate --backend host writes its real run in the
// torch.profiler schema; calibrate --from-trace fits it; validate --against-trace compares the
// scenario, simulated with the fitted profile, with that real run.
TEST(KinetoTraceLoop, HostBackendRunThroughCalibrateAndValidateAgainstTrace) {
  TempDir dir("kineto-host-loop");
  const std::string scenario = PREFETCHLAB_SOURCE_DIR "/scenarios/host/tiny-llama-host.yaml";
  const std::string real_dir = (dir.path() / "real").string();
  const auto real = prefetchlab::testing::run_cli("validate " + scenario + " --backend host --repeats 1 -o " + real_dir);
  ASSERT_EQ(real.exit_code, 0) << real.output;
  std::string traces;
  for (int r = 0; r < 2; ++r) {
    const std::string file = real_dir + "/real_kineto/rank" + std::to_string(r) + ".pt.trace.json";
    ASSERT_TRUE(std::filesystem::exists(file)) << real.output;
    traces += " " + file;
  }
  // The host device's collectives are real thread rendezvous and copies, timed on a shared
  // machine: what is matched and counted is fixed by the scenario, but whether a bus bandwidth
  // can be fitted from a few events per size depends on the machine's load. So this checks what
  // is deterministic, and that the report and the written profile agree on what was fitted.
  const std::string fitted = (dir.path() / "fitted.yaml").string();
  const auto calibrate = prefetchlab::testing::run_cli("calibrate -o " + fitted + " --from-trace" + traces);
  EXPECT_NE(calibrate.output.find("2 rank(s), 120 collectives matched across ranks"), std::string::npos)
      << calibrate.output;
  EXPECT_NE(calibrate.output.find("all_reduce on 2 ranks: not fitted: sizes up to 520 B only"), std::string::npos)
      << calibrate.output;  // only tiny agreement all-reduces
  const auto fitted_in_report = [&](const std::string& kind, int events, int sizes) {
    const bool fit = calibrate.output.find(kind + " on 2 ranks: latency") != std::string::npos;
    std::string refused = kind;
    refused += " on 2 ranks: not fitted: the largest sizes' times do not grow with size (";
    refused += std::to_string(events);
    refused += " events)";
    const bool not_fit = calibrate.output.find(refused) != std::string::npos;
    EXPECT_NE(fit, not_fit) << kind << " is neither fitted nor refused for noise:\n" << calibrate.output;
    if (fit) {
      // Appended piecewise: GCC 12 at -O3 flags `"(" + std::string` here with a false
      // -Wstringop-overflow.
      std::string counts = "(";
      counts += std::to_string(events);
      counts += " events, ";
      counts += std::to_string(sizes);
      counts += " sizes";
      EXPECT_NE(calibrate.output.find(counts), std::string::npos) << calibrate.output;
    }
    return fit;
  };
  const bool all_gather = fitted_in_report("all_gather", 76, 8);
  const bool reduce_scatter = fitted_in_report("reduce_scatter", 36, 5);
  std::string hardware;  // the scenario's own profile when noise left nothing to fit
  if (all_gather || reduce_scatter) {
    ASSERT_EQ(calibrate.exit_code, 0) << calibrate.output;
    const YAML::Node calibration = YAML::LoadFile(fitted)["calibration"];
    EXPECT_EQ(static_cast<bool>(calibration["allgather_bus_bandwidth_gb_per_s"]), all_gather);
    EXPECT_EQ(static_cast<bool>(calibration["reduce_scatter_bus_bandwidth_gb_per_s"]), reduce_scatter);
    if (all_gather) {
      EXPECT_GT(calibration["allgather_bus_bandwidth_gb_per_s"].as<double>(), 0.0);
    }
    if (reduce_scatter) {
      EXPECT_GT(calibration["reduce_scatter_bus_bandwidth_gb_per_s"].as<double>(), 0.0);
    }
    // A fitted latency is clamped at 0: on a loaded machine (ASan, CI) the host backend's fit can
    // land there, so only its presence and sign are checked.
    EXPECT_GE(calibration["collective_latency_us"].as<double>(), 0.0);
    EXPECT_FALSE(calibration["all_reduce_bus_bandwidth_gb_per_s"]);
    hardware = " --hardware " + fitted;
  } else {
    EXPECT_EQ(calibrate.exit_code, 2) << calibrate.output;
    EXPECT_NE(calibrate.output.find("support no constant"), std::string::npos) << calibrate.output;
    EXPECT_FALSE(std::filesystem::exists(fitted));
  }

  const auto validate = prefetchlab::testing::run_cli("validate " + scenario + hardware + " -o " +
                                                      (dir.path() / "v").string() + " --against-trace" + traces);
  ASSERT_EQ(validate.exit_code, 0) << validate.output;
  EXPECT_NE(validate.output.find("gathers: every step's all-gather sequence matches the scenario's"), std::string::npos)
      << validate.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "v" / "validate_summary.csv"));
}

// compute_time_scale from the traced job's scenario: a run simulated 1.5x slower in compute is
// fitted back to 1.5 (compute time is affine in the scale: two simulations and their line).
TEST(KinetoTraceLoop, ComputeTimeScaleIsFittedAgainstTheScenario) {
  TempDir dir("kineto-compute");
  const std::string scenario = PREFETCHLAB_SOURCE_DIR "/scenarios/tiny-llama-2x-h100.yaml";
  const std::string kineto = (dir.path() / "kineto").string();
  const auto run = prefetchlab::testing::run_cli("run " + scenario + " --no-expect -o " + (dir.path() / "out").string() +
                                                 " --kineto-trace " + kineto +
                                                 " --set cluster.calibration.compute_time_scale=1.5");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string fitted = (dir.path() / "fitted.yaml").string();
  const auto calibrate = prefetchlab::testing::run_cli("calibrate -o " + fitted + " --scenario " + scenario +
                                                       " --from-trace " + kineto + "/rank0.pt.trace.json " + kineto +
                                                       "/rank1.pt.trace.json");
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.output;
  EXPECT_NEAR(YAML::LoadFile(fitted)["calibration"]["compute_time_scale"].as<double>(), 1.5, 0.05) << calibrate.output;
  EXPECT_EQ(calibrate.output.find("not fitted: compute_time_scale"), std::string::npos) << calibrate.output;
}

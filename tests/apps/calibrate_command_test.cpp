// calibrate --from-nccl-tests saves what it measures (issue 22): a profile calibrated from a log
// reproduces the log at the log's own sizes through `collective` and the simulator's cost models,
// and logs that are not one clean run are rejected with exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/hardware/hardware_profile.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "sim/cost/collective_cost_model.hpp"
#include "sim/cost/nccl_tuner_cost_model.hpp"
#include "tests/support/cli_runner.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;
namespace fs = std::filesystem;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);

// size -> out-of-place time (us) of an nccl-tests table (a log or `collective`'s output).
std::map<std::int64_t, double> times_of(const std::string& text) {
  std::map<std::int64_t, double> out;
  for (const auto& row : pc::parse_nccl_tests_log(text, "table").rows) out[row.bytes] = row.time_us;
  return out;
}

// The largest relative error of `predicted` against `measured` over sizes in [lo, hi].
double worst_error(const std::map<std::int64_t, double>& measured, const std::map<std::int64_t, double>& predicted,
                   std::int64_t lo, std::int64_t hi) {
  double worst = 0;
  for (const auto& [bytes, us] : measured) {
    if (bytes < lo || bytes > hi || us <= 0) continue;
    worst = std::max(worst, std::abs(predicted.at(bytes) - us) / us);
  }
  return worst;
}

std::string without_curves(const fs::path& profile) {
  std::ifstream in(profile);
  std::string text, line;
  bool in_curves = false;
  while (std::getline(in, line)) {
    if (line.starts_with("  measured_collectives:")) {
      in_curves = true;
      continue;
    }
    if (in_curves && (line.starts_with("   ") || line.starts_with("  -"))) continue;
    in_curves = false;
    text += line + "\n";
  }
  return text;
}

}  // namespace

// The log: the NCCL-tuner model's own all_gather table on 8x H100 (LL, LL128 and Simple by
// size, channels growing with size), 8 B - 8 GiB. The base profile is an A100 box, so nothing of
// the base's own model can make the answer right: only what calibrate saved can.
TEST(CalibrateCurve, CollectiveReproducesTheLogAtItsSizesWithin5Percent) {
  TempDir dir("curve");
  const auto table = run_cli("collective --hardware h100-sxm-8x --op all_gather --ranks 8 -b 8 -e 8GiB");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  const auto log = dir.write("h100.log", table.output);
  const auto profile = dir.path() / "cal.yaml";
  const auto r = run_cli("calibrate --from-nccl-tests " + log.string() + " --hardware a100-sxm-8x -o " + profile.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("saved as measured_collectives"), std::string::npos) << r.output;

  const auto measured = times_of(table.output);
  const auto replay = run_cli("collective --hardware " + profile.string() + " --op all_gather --ranks 8 -b 8 -e 8GiB");
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_NE(replay.output.find("measured_collectives curve"), std::string::npos) << replay.output;
  const auto predicted = times_of(replay.output);
  ASSERT_EQ(predicted.size(), measured.size());
  const double with_curve = worst_error(measured, predicted, 8, 8LL << 30);
  EXPECT_LT(with_curve, 0.05);

  // The same profile without its curve (one latency and one bandwidth, what calibrate saved
  // before): the prefetch-bucket sizes are off by more than the 5% this test allows.
  const auto scalar = dir.write("scalar.yaml", without_curves(profile));
  const auto before = run_cli("collective --hardware " + scalar.string() + " --op all_gather --ranks 8 -b 8 -e 8GiB");
  ASSERT_EQ(before.exit_code, 0) << before.output;
  const double scalar_error = worst_error(measured, times_of(before.output), 64 << 10, 64 << 20);
  EXPECT_GT(scalar_error, 0.05);
  std::printf("64 KiB-64 MiB worst error: latency+bandwidth only %.1f%%, with the curve %.2f%%\n", 100 * scalar_error,
              100 * worst_error(measured, predicted, 64 << 10, 64 << 20));
}

// Two logs of one collective on one group (issue 45): one would silently replace the other's
// curve and bandwidth, so the second is refused naming both, and no profile is written.
TEST(CalibrateCurve, TwoLogsOfOneCollectiveAndGroupAreRefused) {
  const fs::path file = kSourceDir / "tests/data/nccl-issue-1435-all_gather_perf.log";
  TempDir dir("curve-twice");
  const fs::path copy = dir.path() / "rerun.log";
  fs::copy_file(file, copy);
  const auto profile_path = dir.path() / "box.yaml";
  const auto r = run_cli("calibrate --from-nccl-tests " + file.string() + " " + copy.string() +
                         " --hardware rtx4000ada-2x-pcie4 -o " + profile_path.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(copy.string() + ": key '--from-nccl-tests': measures all_gather on 2 ranks, as " + file.string()),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(profile_path));
}

// A real log (NVIDIA/nccl#1435, 2 GPUs, bf16, irregular sizes 16-112 MiB and 736-896 MiB): both
// cost models the simulator can use answer the log's sizes within 5%, and between two logged
// sizes the answer lies between their times.
TEST(CalibrateCurve, SimulatorModelsUseTheCurveOfARealLog) {
  const fs::path file = kSourceDir / "tests/data/nccl-issue-1435-all_gather_perf.log";
  TempDir dir("curve-real");
  const auto profile_path = dir.path() / "box.yaml";
  const auto r = run_cli("calibrate --from-nccl-tests " + file.string() + " --hardware rtx4000ada-2x-pcie4 -o " +
                         profile_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  pc::HardwareProfile profile = pc::load_hardware_profile(profile_path);
  ASSERT_EQ(profile.calibration.measured_collectives.size(), 1u);
  const auto log = pc::read_nccl_tests_log(file);
  for (const auto model : {pc::CalibrationConstants::CollectiveModel::kNcclTuner,
                           pc::CalibrationConstants::CollectiveModel::kRing}) {
    pc::CalibrationConstants cal = profile.calibration;
    cal.collective_model = model;
    const auto cost = ps::make_collective_cost_model(profile, cal);
    for (const auto& row : log.rows) {
      const double us = static_cast<double>(cost->duration_ns({ps::CollectiveKind::kAllGather, row.bytes, 2, 1})) / 1e3;
      EXPECT_NEAR(us, row.time_us, 0.05 * row.time_us) << row.bytes;
    }
    const double mid = static_cast<double>(cost->duration_ns({ps::CollectiveKind::kAllGather, 400LL << 20, 2, 1})) / 1e3;
    EXPECT_GT(mid, log.rows[6].time_us);
    EXPECT_LT(mid, log.rows[7].time_us);
    // Another op or group keeps the model: the curve is for 2-rank all_gather only.
    EXPECT_EQ(cost->duration_ns({ps::CollectiveKind::kReduceScatter, 16 << 20, 2, 1}) > 0, true);
  }
}

TEST(CalibrateCurve, ProfileCurveErrorsNameFileLineAndKey) {
  TempDir dir("curve-bad");
  const std::string base = "rtx4000ada-2x-pcie4";
  struct Case {
    std::string body, needle;
  };
  for (const Case& c : {Case{"sizes_bytes: [1024, 512]\n      times_us: [10, 20]", "sizes_bytes"},
                        Case{"sizes_bytes: [1024, 2048]\n      times_us: [10]", "times_us"},
                        Case{"sizes_bytes: [1024, 2048]\n      times_us: [10, -1]", "times_us"},
                        Case{"sizes_bytes: [1024, 2048]\n      times_us: [10, 20]\n      colour: red", "colour"}}) {
    std::ifstream in(kSourceDir / "hardware" / (base + ".yaml"));
    std::stringstream text;
    text << in.rdbuf();
    const auto file = dir.write("p.yaml", text.str() + "\ncalibration:\n  measured_collectives:\n    - op: all_gather\n"
                                                       "      ranks: 2\n      " + c.body + "\n");
    const auto r = run_cli("collective --hardware " + file.string() + " --op all_gather --ranks 2 -b 1KiB -e 2KiB");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("p.yaml:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("measured_collectives[0]." + c.needle), std::string::npos) << r.output;
  }
}

namespace {

const std::string kHeader =
    "# nThread 1 nGpus 2 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20\n"
    "#  Rank  0 Group  0 Pid 1 on node0 device  0 [0x00] GPU\n"
    "#  Rank  1 Group  0 Pid 1 on node0 device  1 [0x00] GPU\n";
std::string row(long bytes, double us, int wrong = 0) {
  char buffer[200];
  std::snprintf(buffer, sizeof buffer, "%12ld %12ld  bfloat16  none  -1  %8.2f  0.10  0.05  %d  %8.2f  0.10  0.05  %d\n",
                bytes, bytes / 4, us, wrong, us, wrong);
  return buffer;
}

prefetchlab::testing::CliResult calibrate(const TempDir& dir, const std::string& text, const std::string& extra = "") {
  const auto file = dir.write("run.log", text);
  return run_cli("calibrate --from-nccl-tests " + file.string() + " --hardware rtx4000ada-2x-pcie4 -o " +
                 (dir.path() / "o.yaml").string() + " " + extra);
}

}  // namespace

TEST(CalibrateLog, RejectsWhatIsNotOneCleanRun) {
  TempDir dir("logs");
  const std::string command = "./build/all_gather_perf -b 1024 -e 4096 -g 2\n";
  const std::string clean = command + kHeader + row(1024, 10) + row(2048, 11) + row(4096, 13);
  ASSERT_EQ(calibrate(dir, clean).exit_code, 0) << calibrate(dir, clean).output;

  // #wrong != 0 on one row (line 7: the command, three header lines, two rows before it).
  auto r = calibrate(dir, command + kHeader + row(1024, 10) + row(2048, 11) + row(4096, 13, 3));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("run.log:7"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("#wrong"), std::string::npos) << r.output;

  // --op contradicting the log's own command line.
  r = calibrate(dir, clean, "--op all_reduce");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("all_gather_perf"), std::string::npos) << r.output;

  // Two runs pasted together: a second header, sizes that start again, two different ops.
  r = calibrate(dir, clean + kHeader + row(1024, 10) + row(2048, 11));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pasted"), std::string::npos) << r.output;
  r = calibrate(dir, command + kHeader + row(1024, 10) + row(2048, 11) + row(1024, 12) + row(2048, 13));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("run.log:7"), std::string::npos) << r.output;
  r = calibrate(dir, clean + "./build/all_reduce_perf -b 1024 -e 4096 -g 2\n" + row(8192, 20));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pasted"), std::string::npos) << r.output;
  r = calibrate(dir, clean + "# Avg bus bandwidth    : 0.05\n" + row(8192, 20));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("footer"), std::string::npos) << r.output;
}

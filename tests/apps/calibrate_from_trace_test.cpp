// calibrate --from-trace: a multi-rank trace written from known collective costs
// (t = latency + f * S / busBW, the simulator's form) is fitted back within 10%.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/core/trace_import/synthetic_trace.hpp"
#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::SyntheticTrace;
using prefetchlab::testing::TempDir;

namespace {

constexpr double kLatencyUs = 25.0;
constexpr double kAllGatherBusGbPerS = 150.0;
constexpr double kReduceScatterBusGbPerS = 120.0;
constexpr int kRanks = 4;

// True time of one collective of `bytes` (the full buffer) on kRanks ranks.
double true_time_us(double bytes, double bus_gb_per_s) {
  return kLatencyUs + (kRanks - 1.0) / kRanks * bytes / (bus_gb_per_s * 1e3);
}

// kRanks traces of two steps; each step gathers and reduce-scatters at four sizes. Rank r
// reaches each collective r * 37 us late; all ranks finish together (+ r % 2 us).
std::vector<std::string> write_ranks(const TempDir& dir) {
  std::vector<std::string> paths;
  for (int r = 0; r < kRanks; ++r) {
    SyntheticTrace t(r, kRanks);
    double clock = 10'000;
    std::int64_t correlation = 1;
    for (int step = 1; step <= 2; ++step) {
      const double step_start = clock;
      for (const char* op : {"_allgather_base", "_reduce_scatter_base"}) {
        const bool gather = op[1] == 'a';
        for (const std::int64_t elements : {std::int64_t{1} << 20, std::int64_t{1} << 22, std::int64_t{1} << 24, std::int64_t{1} << 26}) {
          const double bytes = static_cast<double>(elements) * 2;  // bf16
          const double t_us = true_time_us(bytes, gather ? kAllGatherBusGbPerS : kReduceScatterBusGbPerS);
          const double last_start = clock + (kRanks - 1) * 37.0;
          const double start = clock + r * 37.0;
          const double end = last_start + t_us + (r % 2);
          t.launch(clock - 5, correlation);
          t.kernel(gather ? "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                          : "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   std::round(start * 1000) / 1000, std::round((end - start) * 1000) / 1000, correlation, 40,
                   {{"Collective name", op}, {"In msg nelems", gather ? elements / kRanks : elements},
                    {"Out msg nelems", gather ? elements : elements / kRanks}, {"Group size", kRanks},
                    {"dtype", "BFloat16"}, {"Process Group Name", "0"}});
          ++correlation;
          clock = last_start + t_us + 50;  // the same on every rank
        }
      }
      t.step(step, step_start - 10, clock - step_start + 10);
      clock += 100;
    }
    paths.push_back(t.write(dir.path() / ("rank" + std::to_string(r) + ".json")).string());
  }
  return paths;
}

}  // namespace

TEST(CalibrateFromTrace, RecoversTheLatencyAndBandwidthThatMadeTheTrace) {
  TempDir dir("calibrate-trace");
  std::string args = "calibrate --base h100-sxm-8x -o " + (dir.path() / "fitted.yaml").string() + " --from-trace";
  for (const auto& path : write_ranks(dir)) args += " " + path;
  const auto result = prefetchlab::testing::run_cli(args);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const YAML::Node calibration = YAML::LoadFile((dir.path() / "fitted.yaml").string())["calibration"];
  ASSERT_TRUE(calibration) << result.output;
  EXPECT_NEAR(calibration["collective_latency_us"].as<double>(), kLatencyUs, 0.1 * kLatencyUs) << result.output;
  EXPECT_NEAR(calibration["allgather_bus_bandwidth_gb_per_s"].as<double>(), kAllGatherBusGbPerS, 0.1 * kAllGatherBusGbPerS);
  EXPECT_NEAR(calibration["reduce_scatter_bus_bandwidth_gb_per_s"].as<double>(), kReduceScatterBusGbPerS,
              0.1 * kReduceScatterBusGbPerS);
  EXPECT_NE(result.output.find("all_gather on 4 ranks: latency"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("(8 events, 4 sizes"), std::string::npos) << result.output;  // 2 steps x 4 sizes
  EXPECT_NE(result.output.find("not fitted: compute_time_scale"), std::string::npos) << result.output;
}

TEST(CalibrateFromTrace, OneRankFitsNoCollectiveAndSaysWhy) {
  TempDir dir("calibrate-trace");
  const auto paths = write_ranks(dir);
  const auto result = prefetchlab::testing::run_cli("calibrate -o " + (dir.path() / "x.yaml").string() +
                                                    " --from-trace " + paths.front());
  // No c10d calls in this trace either: nothing to fit is bad input.
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("one rank only"), std::string::npos) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x.yaml"));
}

TEST(CalibrateFromTrace, OnlyOneSourceAtATime) {
  TempDir dir("calibrate-trace");
  const auto paths = write_ranks(dir);
  const auto result = prefetchlab::testing::run_cli("calibrate -o " + (dir.path() / "x.yaml").string() +
                                                    " --backend host --from-trace " + paths.front());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("more than one is given"), std::string::npos) << result.output;
}

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

TEST(CalibrateFromTrace, FitsDeepSpeedHookTermsFromPythonFunctionEvents) {
  // with_stack=True frames: each module's pre-forward hook (100 + 10 * k us) holds a fetch (30 us)
  // holding an all_gather_coalesced; the inner function shows too. Torch-level all_gather calls
  // of 230 us give host_speed 115 / 230 = 0.5, so the terms at host_speed 1 are half the own time.
  TempDir dir("calibrate-trace");
  SyntheticTrace t(0, 1);
  t.step(1, 0, 100'000);
  const std::string offload = "site-packages/deepspeed/runtime/zero/parameter_offload.py(";
  const std::string coordinator = "site-packages/deepspeed/runtime/zero/partitioned_param_coordinator.py(";
  double clock = 100;
  for (int k = 0; k < 5; ++k) {
    const double own = 100 + 10 * k;  // median 120
    t.cpu(offload + "353): _pre_forward_module_hook", clock, own + 30, "python_function", {});
    t.cpu(offload + "480): pre_sub_module_forward_function", clock + 5, own + 20, "python_function", {});
    t.cpu(coordinator + "270): fetch_sub_module", clock + 10, 30, "python_function", {});
    t.cpu("site-packages/deepspeed/runtime/zero/partition_parameters.py(1100): all_gather_coalesced", clock + 12, 20,
          "python_function", {});
    t.cpu("c10d::_allgather_base_", clock + 14, 230, "cpu_op", {});  // overlapping on purpose: only its time counts
    clock += 1000;
    t.cpu(offload + "400): _post_backward_module_hook", clock, 80, "python_function", {});
    t.cpu(coordinator + "300): release_sub_module", clock + 10, 60, "python_function", {});
    clock += 1000;
  }
  const std::string trace = t.write(dir.path() / "rank0.json").string();
  const std::string fitted = (dir.path() / "fitted.yaml").string();
  const auto result = prefetchlab::testing::run_cli("calibrate --base h100-sxm-8x -o " + fitted + " --from-trace " + trace);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const YAML::Node calibration = YAML::LoadFile(fitted)["calibration"];
  ASSERT_TRUE(calibration) << result.output;
  EXPECT_NEAR(calibration["host_speed"].as<double>(), 0.5, 1e-9) << result.output;
  EXPECT_NEAR(calibration["host_pre_forward_hook_us"].as<double>(), 120 * 0.5, 1e-6) << result.output;
  EXPECT_NEAR(calibration["host_post_backward_hook_us"].as<double>(), 20 * 0.5, 1e-6) << result.output;
  EXPECT_FALSE(calibration["host_pre_backward_hook_us"]) << result.output;  // no such calls
  EXPECT_NE(result.output.find("_pre_forward_module_hook's own time, median 120.0 us over 5 calls"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("not fitted: host_fetch_*"), std::string::npos) << result.output;
  // The written profile is one the simulator reads (5: the scenario's expect: bands hold for the
  // default profile, not for a host twice as slow).
  const auto run = prefetchlab::testing::run_cli("run scenarios/tiny-llama-2x-h100.yaml --set cluster.hardware=" + fitted +
                                                 " --set output.trace=false -o " + (dir.path() / "run").string());
  EXPECT_TRUE(run.exit_code == 0 || run.exit_code == 5) << run.output;
  EXPECT_NE(run.output.find("steady step time"), std::string::npos) << run.output;
}

// calibrate --from-trace: a multi-rank trace written from known collective costs
// (t = latency + f * S / busBW, the simulator's form) is fitted back within 10%.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/hardware/calibration.hpp"
#include "core/hardware/hardware_profile.hpp"
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

// Traces of another GPU than the base profile's (issue 45: a V100 trace went into an H100-named
// profile without a word): calibrated all the same, with a warning on stderr and in the profile.
TEST(CalibrateFromTrace, TracesOfAnotherGpuThanTheBaseAreWarnedAbout) {
  for (const auto& [gpu, warned] : {std::pair<std::string, bool>{"Tesla V100-SXM2-32GB", true},
                                    std::pair<std::string, bool>{"NVIDIA H100 80GB HBM3", false}}) {
    TempDir dir("calibrate-trace-gpu");
    std::string args = "calibrate --base h100-sxm-8x -o " + (dir.path() / "fitted.yaml").string() + " --from-trace";
    for (const auto& path : write_ranks(dir)) {
      nlohmann::json trace;
      std::ifstream(path) >> trace;
      trace["deviceProperties"] = nlohmann::json::array({{{"id", 0}, {"name", gpu}}});
      std::ofstream(path) << trace.dump();
      args += " " + path;
    }
    const auto result = prefetchlab::testing::run_cli(args);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(dir.path() / "fitted.yaml");
    const std::string profile((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string warning = "the traces ran on " + gpu + " but the base profile is NVIDIA H100 SXM 80GB";
    EXPECT_EQ(result.output.find("warning: " + warning) != std::string::npos, warned) << result.output;
    EXPECT_EQ(profile.find("# warning: " + warning) != std::string::npos, warned) << profile;
  }
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
  // with_stack=True frames: each module's pre-forward wrapper (own 100 + 10 * k us around its
  // fetch of 30 us) calls the hook function (10 us less: the wrapper's own 10 us are the
  // backward hooks' set-up), which holds the fetch holding an all_gather_coalesced. The term is
  // the hook function's own time (median 110 us); the post-backward hook shows only its
  // wrapper (older releases), whose own time is then the term. Torch-level all_gather calls of
  // 230 us give host_speed 115 / 230 = 0.5, so the terms at host_speed 1 are half the own time.
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
  EXPECT_NEAR(calibration["host_pre_forward_hook_us"].as<double>(), 110 * 0.5, 1e-6) << result.output;
  EXPECT_NEAR(calibration["host_post_backward_hook_us"].as<double>(), 20 * 0.5, 1e-6) << result.output;
  EXPECT_FALSE(calibration["host_pre_backward_hook_us"]) << result.output;  // no such calls
  EXPECT_NE(result.output.find("pre_sub_module_forward_function's own time, median 110.0 us over 5 calls"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("_post_backward_module_hook's own time, median 20.0 us over 5 calls"), std::string::npos)
      << result.output;
  // The set-up needs both forward wrappers; this trace has no post-forward hook.
  EXPECT_FALSE(calibration["host_backward_hook_setup_us"]) << result.output;
  EXPECT_NE(result.output.find("not fitted: host_fetch_*"), std::string::npos) << result.output;
  // The written profile is one the simulator reads (5: the scenario's expect: bands hold for the
  // default profile, not for a host twice as slow).
  const auto run = prefetchlab::testing::run_cli("run scenarios/tiny-llama-2x-h100.yaml --set cluster.hardware=" + fitted +
                                                 " --set output.trace=false -o " + (dir.path() / "run").string());
  EXPECT_TRUE(run.exit_code == 0 || run.exit_code == 5) << run.output;
  EXPECT_NE(run.output.find("steady step time"), std::string::npos) << run.output;
}

namespace {

// run --kineto-trace (the simulated run as torch.profiler with with_stack=True would record it),
// then calibrate --from-trace with the same scenario; returns the written calibration. Gradient
// buckets of 1e6 elements: 4 flushes of different sizes per iteration (one bucket of 21
// parameters would leave host_reduce_scatter_per_param_us held at the base).
YAML::Node fit_simulated_run(const TempDir& dir, const std::string& noise, std::string* output) {
  const std::string kineto = (dir.path() / "kineto").string();
  const std::string scenario = "scenarios/tiny-llama-2x-h100.yaml --set zero.reduce_bucket_size=1e6";
  const auto run = prefetchlab::testing::run_cli("run " + scenario + " --set output.trace=false " + noise + " -o " +
                                                 (dir.path() / "run").string() + " --kineto-trace " + kineto);
  // 5: the scenario's expect: bands are for its own noise settings, not the test's.
  EXPECT_TRUE(run.exit_code == 0 || run.exit_code == 5) << run.output;
  const std::string fitted = (dir.path() / "fitted.yaml").string();
  const auto fit = prefetchlab::testing::run_cli("calibrate --base h100-sxm-8x -o " + fitted + " --from-trace " + kineto +
                                                 "/rank0.pt.trace.json " + kineto +
                                                 "/rank1.pt.trace.json --scenario " + scenario);
  EXPECT_EQ(fit.exit_code, 0) << fit.output;
  *output = fit.output;
  return YAML::LoadFile(fitted)["calibration"];
}

// Every host term of the DeepSpeed host path that python_function frames support, against the
// values the simulation ran with (the scenario's profile).
void expect_host_terms_within(const YAML::Node& calibration, const std::string& output, double tolerance) {
  const prefetchlab::core::HardwareProfile profile = prefetchlab::core::load_hardware_profile("hardware/h100-sxm-8x.yaml");
  int checked = 0;
  for (const auto& term : prefetchlab::core::host_terms()) {
    const std::string key(term.yaml_key);
    if (key == "host_all_reduce_call_us" || key == "host_optimizer_step_per_param_us") {
      continue;  // the optimizer step's: not fitted from frames
    }
    ASSERT_TRUE(calibration[key]) << key << " not fitted\n" << output;
    const double truth_us = static_cast<double>(profile.calibration.*(term.field)) / 1e3;
    EXPECT_NEAR(calibration[key].as<double>(), truth_us, tolerance * truth_us) << key << "\n" << output;
    ++checked;
  }
  EXPECT_EQ(checked, 16);
}

}  // namespace

TEST(CalibrateFromTrace, RecoversDeepSpeedHostTermsFromASimulatedRunWithItsScenario) {
  // A noise-free simulated run: each call's frames hold exactly its terms, so the fit is exact
  // but for the microsecond timestamps' rounding. The first iteration (DeepSpeed records its
  // trace, no prefetch) does not pair with the steady iteration's calls and is said so.
  TempDir dir("calibrate-trace-frames");
  std::string output;
  const YAML::Node calibration = fit_simulated_run(dir, "", &output);
  ASSERT_TRUE(calibration) << output;
  expect_host_terms_within(calibration, output, 0.01);
  EXPECT_NE(output.find("fetch_sub_module: 640 calls paired with the scenario's over 10 step(s)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("2 step(s) not paired with the scenario's calls"), std::string::npos) << output;
}

TEST(CalibrateFromTrace, RecoversDeepSpeedHostTermsUnderHostJitter) {
  // 5% host jitter on every charge: within 10% (the all_gather_coalesced terms rest on 100 calls).
  TempDir dir("calibrate-trace-frames-jitter");
  std::string output;
  const YAML::Node calibration = fit_simulated_run(dir, "--set noise.host_jitter=0.05", &output);
  ASSERT_TRUE(calibration) << output;
  expect_host_terms_within(calibration, output, 0.10);
}

TEST(CalibrateFromTrace, AScenarioOfAnotherJobPairsNoStepAndSaysWhy) {
  TempDir dir("calibrate-trace-frames-other");
  const std::string kineto = (dir.path() / "kineto").string();
  const auto run = prefetchlab::testing::run_cli("run scenarios/tiny-llama-2x-h100.yaml --set output.trace=false -o " +
                                                 (dir.path() / "run").string() + " --kineto-trace " + kineto);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // No prefetching: the scenario gathers per module, so its steady iteration's calls differ.
  const std::string fitted = (dir.path() / "fitted.yaml").string();
  const auto fit = prefetchlab::testing::run_cli(
      "calibrate --base h100-sxm-8x -o " + fitted + " --from-trace " + kineto + "/rank0.pt.trace.json " + kineto +
      "/rank1.pt.trace.json --scenario scenarios/tiny-llama-2x-h100.yaml --set zero.stage3_prefetch_bucket_size=0");
  ASSERT_EQ(fit.exit_code, 0) << fit.output;  // the hook terms and collectives still fit
  EXPECT_NE(fit.output.find("12 step(s) not paired with the scenario's calls"), std::string::npos) << fit.output;
  EXPECT_NE(fit.output.find("the first: rank 0 step 1 has 64 fetch_sub_module, 42 all_gather_coalesced"),
            std::string::npos)
      << fit.output;
  const YAML::Node calibration = YAML::LoadFile(fitted)["calibration"];
  EXPECT_FALSE(calibration["host_fetch_call_us"]) << fit.output;
  EXPECT_TRUE(calibration["host_pre_forward_hook_us"]) << fit.output;
}

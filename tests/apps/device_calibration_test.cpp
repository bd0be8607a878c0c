// calibrate --backend measures what the scenario runs (issue 20): the plan of shapes and sizes
// (apps/calibration_plan), the bandwidth fit (apps/bandwidth_fit), and on the host device the
// fit-error limit: a profile above it is not written (exit 2) unless --force.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/bandwidth_fit.hpp"
#include "apps/calibration_plan.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/scenario/scenario.hpp"
#include "tests/support/cli_runner.hpp"

namespace pa = prefetchlab::apps;
namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;
namespace fs = std::filesystem;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kSourceDir(PREFETCHLAB_SOURCE_DIR);
const fs::path kGpt2Medium = kSourceDir / "scenarios" / "gpu" / "gpt2-medium-offload-1gpu.yaml";
const fs::path kTinyOffload = kSourceDir / "scenarios" / "host" / "tiny-llama-offload-1gpu.yaml";

pc::Scenario load(const fs::path& file) {
  return pc::load_scenario(file, {}, pc::BundledData::from_root(kSourceDir));
}

bool contains(const std::vector<std::int64_t>& v, std::int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

// A GPU measures the scenario's own GEMMs: M = micro_batch x seq_len, N and K its Linear
// layers' widths, nothing of the tiny model's M = 32.
TEST(CalibrationPlan, GpuMeasuresTheScenariosShapesAndBuckets) {
  const pc::Scenario s = load(kGpt2Medium);
  const pa::CalibrationPlan plan = pa::make_calibration_plan(pg::Backend::kCuda, &s, kSourceDir / "models", 1);
  const std::int64_t tokens = s.training.micro_batch * s.training.seq_len;
  ASSERT_FALSE(plan.gemm_shapes.empty());
  std::set<std::pair<std::int64_t, std::int64_t>> linear;
  for (const auto& p : s.model.params) {
    if (p.gemm_in > 0) linear.insert({p.gemm_out, p.gemm_in});
  }
  EXPECT_EQ(plan.gemm_shapes.size(), linear.size());
  for (const auto& g : plan.gemm_shapes) {
    EXPECT_EQ(g.m, tokens);
    EXPECT_TRUE(linear.count({g.n, g.k})) << g.n << " x " << g.k;
  }
  // Memory-bound passes at >= 1 GiB; copies and collectives at the prefetch bucket's bytes.
  for (const auto b : plan.memory_pass_sizes_bytes) EXPECT_GE(b, std::int64_t{1} << 30);
  const std::int64_t bucket_bytes = s.zero.effective_prefetch_bucket_numel() * 2;
  EXPECT_TRUE(contains(plan.copy_sizes_bytes, bucket_bytes));
  EXPECT_TRUE(contains(plan.collective_sizes_bytes, bucket_bytes));
  EXPECT_TRUE(std::is_sorted(plan.copy_sizes_bytes.begin(), plan.copy_sizes_bytes.end()));
  EXPECT_NE(plan.gemm_source.find(std::to_string(tokens)), std::string::npos) << plan.gemm_source;
}

// Without a scenario a GPU measures 7B-class layers from launch-bound to plateau token counts.
TEST(CalibrationPlan, GpuDefaultSpans7BLayers) {
  const pa::CalibrationPlan plan = pa::make_calibration_plan(pg::Backend::kCuda, nullptr, kSourceDir / "models", 2);
  std::set<std::int64_t> tokens, widths;
  for (const auto& g : plan.gemm_shapes) tokens.insert(g.m), widths.insert(g.n), widths.insert(g.k);
  EXPECT_GE(tokens.size(), 3u);
  EXPECT_TRUE(widths.count(4096));   // Llama-2-7B's hidden size
  EXPECT_TRUE(widths.count(11008));  // and its MLP width
  for (const auto b : plan.collective_sizes_bytes) EXPECT_EQ(b % (2 * 2), 0) << b;  // whole bf16 slots of 2 ranks
}

// The host device keeps to sizes a CPU runs in seconds: the scenario's shapes scaled down,
// buckets above its sweep left out and said so.
TEST(CalibrationPlan, HostScalesTheScenarioDown) {
  const pc::Scenario s = load(kGpt2Medium);
  const pa::CalibrationPlan plan = pa::make_calibration_plan(pg::Backend::kHost, &s, kSourceDir / "models", 1);
  for (const auto& g : plan.gemm_shapes) {
    EXPECT_LE(static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k), 1.6e8);
  }
  for (const auto b : plan.memory_pass_sizes_bytes) EXPECT_LE(b, std::int64_t{2} << 20);
  for (const auto b : plan.copy_sizes_bytes) EXPECT_LE(b, std::int64_t{16} << 20);
  EXPECT_FALSE(plan.notes.empty());
  // A scenario sized for the host keeps its shapes as they are.
  const pc::Scenario tiny = load(kTinyOffload);
  const pa::CalibrationPlan tiny_plan = pa::make_calibration_plan(pg::Backend::kHost, &tiny, kSourceDir / "models", 1);
  for (const auto& g : tiny_plan.gemm_shapes) EXPECT_EQ(g.m, tiny.training.micro_batch * tiny.training.seq_len);
}

TEST(BandwidthFit, RecoversARateAndReportsEachSizesError) {
  // 10 GB/s exactly, then one size 2x slow.
  std::vector<pg::SizeTiming> points = {{1'000'000, 100'000}, {4'000'000, 400'000}, {16'000'000, 1'600'000}};
  pa::BandwidthFit f = pa::fit_bandwidth(points);
  EXPECT_NEAR(f.bytes_per_s, 1e10, 1e4);
  EXPECT_NEAR(f.rms_relative_error, 0, 1e-9);
  EXPECT_NEAR(pa::fit_bandwidth(points, 2.0).bytes_per_s, 2e10, 1e4);  // read + write
  points[2].time_ns *= 2;
  f = pa::fit_bandwidth(points);
  EXPECT_GT(f.rms_relative_error, 0.1);
  ASSERT_EQ(f.predicted_ns.size(), 3u);
  EXPECT_LT(f.predicted_ns[2], points[2].time_ns);
  EXPECT_EQ(pa::fit_bandwidth({}).bytes_per_s, 0);
}

// The host device at a scenario's shapes: a limit no fit meets refuses the profile (exit 2,
// nothing written, the message names the limit and --force); --force writes it and says so.
TEST(DeviceCalibration, FitAboveTheLimitIsRefusedUnlessForced) {
  TempDir dir("calibrate-limit");
  const fs::path profile = dir.path() / "p.yaml";
  const std::string base = "calibrate --backend host --ranks 1 --iterations 1 " + kTinyOffload.string() + " -o " + profile.string();
  const auto refused = run_cli(base + " --max-fit-error 0.000001");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_FALSE(fs::exists(profile));
  EXPECT_NE(refused.output.find("--max-fit-error"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--force"), std::string::npos) << refused.output;
  // Each GEMM shape's error is printed, at the scenario's M = 1 x 32 tokens.
  EXPECT_NE(refused.output.find("tiny-llama-offload-1gpu's Linear shapes at M = micro_batch x seq_len = 32 tokens"),
            std::string::npos) << refused.output;
  const auto forced = run_cli(base + " --max-fit-error 0.000001 --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  const std::string text = read_file(profile);
  EXPECT_NE(text.find("written with --force"), std::string::npos);
  pc::load_hardware_profile(profile);  // it loads
  // The base is the scenario's hardware: h100-sxm-8x's GPU.
  EXPECT_NE(text.find("h100-sxm-8x.yaml"), std::string::npos);
}

TEST(DeviceCalibration, FitOptionsNeedABackend) {
  const auto r = run_cli("calibrate --from-nccl-tests x.log --hardware h100-sxm-8x --force -o /dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
}

TEST(DeviceCalibration, SetWithoutAScenarioIsAnError) {
  const auto r = run_cli("calibrate --backend host --ranks 1 --set training.micro_batch=2 -o /dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--set"), std::string::npos) << r.output;
}

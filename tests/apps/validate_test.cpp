// `calibrate --backend host` then `validate --backend host` at 1 and 2 ranks, and on the
// parameter-offload scenario at 1 rank (finite error for every metric, the files
// plots/validate.py reads), and `replay` of a real run's samples.csv
// reproducing its buckets.csv for the adaptive policies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hardware/hardware_profile.hpp"
#include "tests/support/cli_runner.hpp"
#include "sim/trace/trace_validation.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const std::string kScenario = std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-host.yaml";
const std::string kOffloadScenario = std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-offload-1gpu.yaml";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::vector<std::string>> csv_rows(const std::filesystem::path& p) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(slurp(p));
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::stringstream cell_stream(line);
    std::string cell;
    while (std::getline(cell_stream, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// real_trace.json and simulated_trace.json are well-formed Chrome traces, and the real one
// is the run whose metrics validate wrote: per rank and iteration its module-kernel spans add up
// to the iteration's compute time (the maximum over ranks, reached by some rank), and it has
// every all-gather and reduce-scatter the iterations counted.
void check_timelines(const std::filesystem::path& out, int ranks) {
  for (const char* name : {"real_trace.json", "simulated_trace.json"}) {
    const auto trace = nlohmann::json::parse(slurp(out / name));
    EXPECT_EQ(prefetchlab::sim::validate_chrome_trace(trace), std::vector<std::string>{}) << name;
  }
  const auto trace = nlohmann::json::parse(slurp(out / "real_trace.json"));
  std::map<std::pair<int, int>, std::int64_t> compute_ns;  // (rank, iteration)
  std::map<std::pair<int, std::string>, int> collectives;  // (rank, name)
  int fetches = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    const int rank = e["pid"];
    if (name.rfind("fwd ", 0) == 0 || name.rfind("bwd ", 0) == 0) {
      compute_ns[std::make_pair(rank, e["args"]["iteration"].get<int>())] += std::llround(e["dur"].get<double>() * 1000);
    } else if (name.rfind("fetch ", 0) == 0) {
      ++fetches;
    } else {
      ++collectives[std::make_pair(rank, name)];
    }
  }
  EXPECT_GT(fetches, 0);
  const auto iterations = csv_rows(out / "iterations.csv");
  ASSERT_EQ(iterations[0][8], "compute_ns");
  ASSERT_EQ(iterations[0][14], "all_gather_count");
  ASSERT_EQ(iterations[0][15], "reduce_scatter_count");
  int all_gathers = 0, reduce_scatters = 0;
  for (std::size_t i = 1; i < iterations.size(); ++i) {
    const int iteration = std::stoi(iterations[i][0]);
    const std::int64_t metric = std::stoll(iterations[i][8]);
    std::int64_t most = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t traced = compute_ns[std::make_pair(r, iteration)];
      EXPECT_LE(traced, metric + 3) << "rank " << r << " iteration " << iteration;  // ns rounding per span
      most = std::max(most, traced);
    }
    EXPECT_NEAR(static_cast<double>(most), static_cast<double>(metric), 300) << "iteration " << iteration;
    all_gathers += std::stoi(iterations[i][14]);
    reduce_scatters += std::stoi(iterations[i][15]);
  }
  // One rank launches no collective (DeepSpeed's no-gather handle), though it counts gathers.
  if (ranks == 1) all_gathers = reduce_scatters = 0;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ((collectives[{r, "all_gather"}]), all_gathers) << "rank " << r;
    EXPECT_EQ((collectives[{r, "reduce_scatter"}]), reduce_scatters) << "rank " << r;
  }
  // One clock for all ranks: no rank leaves a collective before every rank entered it, so the
  // k-th collective's spans on two ranks overlap. Each rank counting from its own set-up's end
  // put them ~10 ms apart; the median tolerates a thread descheduled between op and event.
  if (ranks == 2) {
    std::map<std::string, std::vector<std::pair<double, double>>> spans[2];  // name -> (start, end) us
    for (const auto& e : trace["traceEvents"]) {
      const std::string name = e.value("name", "");
      if (e["ph"] != "X" || (name != "all_gather" && name != "reduce_scatter" && name != "all_reduce")) continue;
      const double ts = e["ts"];
      spans[e["pid"].get<int>()][name].emplace_back(ts, ts + e["dur"].get<double>());
    }
    std::vector<double> gaps_us;  // latest start minus earliest end: <= 0 when they overlap
    for (auto& [name, mine] : spans[0]) {
      auto& theirs = spans[1][name];
      std::sort(mine.begin(), mine.end());
      std::sort(theirs.begin(), theirs.end());
      ASSERT_EQ(mine.size(), theirs.size()) << name;
      for (std::size_t k = 0; k < mine.size(); ++k) {
        gaps_us.push_back(std::max(mine[k].first, theirs[k].first) - std::min(mine[k].second, theirs[k].second));
      }
    }
    ASSERT_FALSE(gaps_us.empty());
    std::nth_element(gaps_us.begin(), gaps_us.begin() + static_cast<std::ptrdiff_t>(gaps_us.size() / 2), gaps_us.end());
    EXPECT_LT(gaps_us[gaps_us.size() / 2], 500.0) << "ranks' collective spans do not line up: clocks not aligned";
  }
}

void calibrate_then_validate(int ranks, const std::string& scenario = kScenario) {
  TempDir dir("validate-" + std::to_string(ranks));
  const auto profile = dir.path() / "host.yaml";
  // Each point is the median of its repetitions: with one, a single descheduling of a rank's
  // thread (ctest runs other tests beside this one) could make the smallest size the slowest and
  // leave no growth with size to fit. Three need two of them hit.
  const std::string iterations = ranks > 1 ? "3" : "1";
  const auto cal = run_cli("calibrate --backend host --ranks " + std::to_string(ranks) + " --iterations " + iterations +
                           " -o " + profile.string());
  ASSERT_EQ(cal.exit_code, 0) << cal.output;
  if (ranks > 1) {
    EXPECT_NE(cal.output.find("#       size         count      type   redop"), std::string::npos) << cal.output;
    EXPECT_NE(slurp(profile).find("allgather_bus_bandwidth_gb_per_s"), std::string::npos);
    // The measured times by size are saved, not only the fit: both ops, one curve each, and
    // the curve gives back what was measured at its sizes.
    const prefetchlab::core::HardwareProfile saved = prefetchlab::core::load_hardware_profile(profile);
    ASSERT_EQ(saved.calibration.measured_collectives.size(), 2u) << slurp(profile);
    for (const auto& curve : saved.calibration.measured_collectives) {
      EXPECT_EQ(curve.ranks, ranks);
      ASSERT_GE(curve.sizes_bytes.size(), 4u);
      for (std::size_t i = 0; i < curve.sizes_bytes.size(); ++i) {
        EXPECT_NEAR(curve.time_us(curve.sizes_bytes[i]), curve.times_us[i], 1e-6 * curve.times_us[i]);
        if (i > 0) {
          EXPECT_GE(curve.times_us[i], curve.times_us[i - 1]) << "a bigger bucket measured cheaper";
        }
      }
    }
  } else {
    EXPECT_NE(cal.output.find("collective fits skipped"), std::string::npos) << cal.output;
    EXPECT_EQ(slurp(profile).find("measured_collectives"), std::string::npos);
  }
  EXPECT_NE(slurp(profile).find("gemm_half_volume_mnk"), std::string::npos);

  const auto out = dir.path() / "v";
  // On one rank the profile is named relative to the working directory, as a user types it
  // (not relative to the scenario's folder, as a path inside the scenario would be).
  const std::string hardware = ranks == 1 ? std::string("host.yaml") : profile.string();
  const std::string in_dir = ranks == 1 ? "cd " + dir.path().string() + " && " : "";
  const auto v = run_cli("validate " + scenario + " --backend host --hardware " + hardware + " --repeats 2 -o " +
                             out.string() + " --set cluster.gpus_per_node=" + std::to_string(ranks),
                         in_dir);
  ASSERT_EQ(v.exit_code, 0) << v.output;
  const auto summary = csv_rows(out / "validate_summary.csv");
  ASSERT_EQ(summary.size(), 7u) << slurp(out / "validate_summary.csv");
  EXPECT_EQ(summary[0], (std::vector<std::string>{"metric", "real", "simulated", "error", "error_basis", "real_spread", "real_runs"}));
  std::map<std::string, double> errors;
  for (std::size_t i = 1; i < summary.size(); ++i) {
    const double error = std::stod(summary[i][3]);
    EXPECT_TRUE(std::isfinite(error)) << summary[i][0] << " error " << summary[i][3];
    EXPECT_TRUE(std::isfinite(std::stod(summary[i][5]))) << summary[i][0] << " spread " << summary[i][5];
    EXPECT_GT(std::stod(summary[i][1]) + std::stod(summary[i][2]), -1) << summary[i][0];
    errors[summary[i][0]] = error;
  }
  for (const char* m : {"step_time_ns", "forward_stall_ns", "backward_stall_ns", "peak_allocated_bytes", "peak_reserved_bytes", "bucket_numel"}) {
    EXPECT_TRUE(errors.count(m)) << m;
  }
  EXPECT_GT(std::stod(summary[1][1]), 0) << "a real step time was measured";
  // The static controller's trajectory is the simulator's: no error there.
  EXPECT_EQ(errors["bucket_numel"], 0.0);
  const auto per_iteration = csv_rows(out / "validate.csv");
  ASSERT_EQ(per_iteration.size(), 5u);  // header + 4 iterations
  EXPECT_EQ(per_iteration[0][0], "iteration");
  EXPECT_EQ(per_iteration[0][2], "real_step_time_ns");
  EXPECT_EQ(per_iteration[0][3], "simulated_step_time_ns");
  EXPECT_EQ(csv_rows(out / "buckets.csv").size(), 1u + 4u * static_cast<unsigned>(ranks));
  EXPECT_GT(csv_rows(out / "samples.csv").size(), 1u);
  // Several ranks: how unequal they were, real beside simulated (identical simulated ranks: 0).
  const auto imbalance = v.output.find("rank imbalance");
  EXPECT_EQ(imbalance != std::string::npos, ranks > 1) << v.output;
  if (ranks > 1 && imbalance != std::string::npos) {
    EXPECT_NE(v.output.find("simulated +0.0%", imbalance), std::string::npos) << v.output;
    const auto real_at = v.output.find("real ", imbalance);
    ASSERT_NE(real_at, std::string::npos);
    EXPECT_GE(std::stod(v.output.substr(real_at + 5)), 0.0) << v.output;
  }
  check_timelines(out, ranks);
}

}  // namespace

TEST(ValidateCommand, CalibrateThenValidateGivesFiniteErrorsOnOneRank) { calibrate_then_validate(1); }
TEST(ValidateCommand, CalibrateThenValidateGivesFiniteErrorsOnTwoRanks) { calibrate_then_validate(2); }
// The bundled single-GPU scenario with parameters in host memory: every fetch copies up.
TEST(ValidateCommand, CalibrateThenValidateTheOffloadScenarioGivesFiniteErrorsOnOneRank) {
  calibrate_then_validate(1, kOffloadScenario);
}

TEST(ValidateCommand, ReplayOfARealRunsSamplesReproducesItsBuckets) {
  for (const std::string policy : {"ema_threshold", "pace_search"}) {
    SCOPED_TRACE(policy);
    TempDir dir("validate-replay");
    std::string sets = " --set controller.policy=" + policy;
    sets += policy == "pace_search" ? " --set controller.memory_budget_bytes=2GiB" : " --set controller.update_interval=1";
    const auto v = run_cli("validate " + kScenario + " --backend host --repeats 1 -o " + dir.path().string() + sets);
    ASSERT_EQ(v.exit_code, 0) << v.output;
    const auto replayed = dir.path() / "replayed.csv";
    const auto r = run_cli("replay --scenario " + kScenario + sets + " --samples " + (dir.path() / "samples.csv").string() +
                           " -o " + replayed.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(slurp(replayed), slurp(dir.path() / "buckets.csv"));
    EXPECT_GT(csv_rows(replayed).size(), 8u);
  }
}

// NVMe offload is not modelled: the scenario is refused when read, exit 2, naming the key.
TEST(ValidateCommand, NvmeOffloadIsAClearError) {
  TempDir dir("validate-nvme");
  const auto v = run_cli("validate " + kOffloadScenario + " --backend host --repeats 1 -o " + dir.path().string() +
                         " --set zero.offload_param.device=nvme --set zero.offload_param.nvme_path=/tmp");
  EXPECT_EQ(v.exit_code, 2) << v.output;
  EXPECT_NE(v.output.find("is nvme, which is not modelled"), std::string::npos) << v.output;
}

TEST(ValidateCommand, BadBackendAndUnbuiltCudaAreClearErrors) {
  const auto bad = run_cli("validate " + kScenario + " --backend tpu");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("host or cuda"), std::string::npos) << bad.output;
  const auto neither = run_cli("calibrate -o /tmp/x.yaml");
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.output.find("--backend"), std::string::npos) << neither.output;
}

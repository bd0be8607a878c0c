// `prefetchlab tune` through the real binary, with small budgets: bad input is a clear error;
// ds_config.json is valid JSON whose keys are DeepSpeed's own (ZeroConfig's key list); the
// static recommendation runs without OOM and under the cap on every scenario; controller.yaml
// is a section a scenario can hold; the tuned ema_threshold is not worse than the default on
// held-out seeds; the outputs do not depend on -j.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/support/cli_runner.hpp"
#include "core/zero/zero_config.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kTune = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "tune";
const std::string kBert = (kTune / "bert-base-2x-pcie.yaml").string();
const std::string kTiny = (kTune / "tiny-llama-2x-nvlink.yaml").string();

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every key of the fragment's zero_optimization must be one DeepSpeed reads.
void expect_deepspeed_keys_only(const fs::path& ds_config) {
  const nlohmann::json doc = nlohmann::json::parse(read_file(ds_config));  // throws if not JSON
  ASSERT_TRUE(doc.is_object());
  ASSERT_EQ(doc.size(), 1u);
  ASSERT_TRUE(doc.contains("zero_optimization"));
  std::set<std::string> known;
  for (const auto& key : prefetchlab::core::zero_config_key_docs()) known.insert(key.json_name);
  for (const auto& [key, value] : doc["zero_optimization"].items()) {
    EXPECT_TRUE(known.count(key)) << key << " is not a DeepSpeed zero_optimization key";
  }
}

nlohmann::json run_summary(const std::string& scenario, const std::vector<std::string>& sets, const TempDir& dir,
                           const std::string& tag) {
  std::string args = "run " + scenario + " -o " + (dir.path() / tag).string();
  for (const auto& set : sets) args += " --set '" + set + "'";
  const auto result = run_cli(args);
  EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 4) << result.output;
  return nlohmann::json::parse(read_file(dir.path() / tag / "summary.json"));
}

}  // namespace

TEST(TuneCommand, BadInputIsAClearError) {
  const TempDir dir("tune-bad");
  const std::string out = " -o " + (dir.path() / "out").string();
  auto expect_bad = [&](const std::string& args, const std::string& words) {
    const auto result = run_cli("tune " + kTiny + " " + args + out);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_NE(result.output.find(words), std::string::npos) << args << "\n" << result.output;
  };
  expect_bad("--policy greedy", "static, ema_threshold or pace_search");
  expect_bad("--budget 0", "is below 1");
  expect_bad("--seeds 0", "is below 1");
  expect_bad("--memory-cap lots", "not a positive size in bytes");
  expect_bad("--memory-cap 0", "not a positive size in bytes");
  expect_bad("--policy pace_search --deployable", "DeepSpeed has no such policy");
  expect_bad("--slurm", "picks candidates from the earlier rounds' scores");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out" / "tune.json"));
  const auto missing = run_cli("tune " + (kTune / "no-such.yaml").string() + out);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
}

TEST(TuneCommand, StaticRecommendationFitsTheCapEverywhere) {
  const TempDir dir("tune-static");
  // 2600 MiB binds on BERT: DeepSpeed's default bucket (5e7) peaks above it there (2652 MiB).
  const std::int64_t cap_bytes = 2600LL * 1024 * 1024;
  const auto result = run_cli("tune " + kBert + " " + kTiny + " --policy static --memory-cap 2600MiB --seeds 1 --budget 6 -j 2 -o " +
                              (dir.path() / "out").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path ds_config = dir.path() / "out" / "ds_config.json";
  expect_deepspeed_keys_only(ds_config);
  const nlohmann::json tuned = nlohmann::json::parse(read_file(dir.path() / "out" / "tune.json"));
  EXPECT_EQ(tuned["memory_cap_bytes"], cap_bytes);
  // The recommendation, loaded from the fragment itself, on each scenario and on tuning and
  // held-out seeds.
  int n = 0;
  for (const auto& scenario : {kBert, kTiny}) {
    for (const int seed : {1, 1002}) {
      const nlohmann::json summary = run_summary(
          scenario, {"zero.ds_config=" + ds_config.string(), "noise.seed=" + std::to_string(seed),
                     "output.trace=false"},
          dir, "run" + std::to_string(n++));
      EXPECT_EQ(summary["status"], "ok") << scenario;
      EXPECT_LE(summary["peak_reserved_bytes"].get<std::int64_t>(), cap_bytes) << scenario << " seed " << seed;
    }
  }
  // Every per-scenario row the report's table shows for "tuned" is ok and under the cap too.
  for (const auto& row : tuned["scenarios"]) {
    EXPECT_EQ(row["tuned"]["status"], "ok");
    EXPECT_LE(row["tuned"]["peak_reserved_bytes"].get<std::int64_t>(), cap_bytes);
  }
  const std::string report = read_file(dir.path() / "out" / "report.md");
  EXPECT_NE(report.find("| bert-base-2x-pcie | tuned |"), std::string::npos) << report;
  EXPECT_NE(report.find("| tiny-llama-2x-nvlink | best static"), std::string::npos) << report;
}

TEST(TuneCommand, EmaThresholdIsNoWorseThanTheDefaultOnHeldOutSeeds) {
  const TempDir dir("tune-ema");
  const fs::path out = dir.path() / "out";
  const auto result = run_cli("tune " + kBert + " " + kTiny + " --policy ema_threshold --seeds 1 --budget 10 -j 2 -o " +
                              out.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  expect_deepspeed_keys_only(out / "ds_config.json");
  const nlohmann::json ds = nlohmann::json::parse(read_file(out / "ds_config.json"));
  EXPECT_EQ(ds["zero_optimization"]["stage3_adaptive_prefetch_bucket_size"], true);
  const nlohmann::json tuned = nlohmann::json::parse(read_file(out / "tune.json"));
  for (const auto& row : tuned["scenarios"]) {
    const double default_ns = row["policy_default"]["mean_steady_step_ns"];
    const double tuned_ns = row["tuned"]["mean_steady_step_ns"];
    // Throughput within -0.5% of the default ema_threshold.
    EXPECT_GE(default_ns / tuned_ns, 0.995) << row["scenario"];
  }
  const std::string report = read_file(out / "report.md");
  EXPECT_NE(report.find("needs PR #8431"), std::string::npos);
  EXPECT_NE(report.find("DeepSpeed hard-codes"), std::string::npos) << report;
  // One evaluations.csv row per simulation (header + rows), sorted by evaluation number.
  std::ifstream csv(out / "evaluations.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("evaluation,role,", 0), 0u);
  std::size_t rows = 0;
  for (; std::getline(csv, line); ++rows) EXPECT_EQ(line.rfind(std::to_string(rows) + ",", 0), 0u) << line;
  EXPECT_GT(rows, 0u);
  // controller.yaml is a section a scenario can hold: append it to a scenario and run it.
  const fs::path scenario = dir.write("with-tuned.yaml", read_file(kTiny) + read_file(out / "controller.yaml"));
  const nlohmann::json summary = run_summary(scenario.string(), {"output.trace=false"}, dir, "tuned-run");
  EXPECT_EQ(summary["status"], "ok");
}

TEST(TuneCommand, DeployableUsesOnlyTheAdaptiveKeysAndOutputsDoNotDependOnJobs) {
  const TempDir dir("tune-deployable");
  std::string first;
  for (const char* jobs : {"1", "2"}) {
    const fs::path out = dir.path() / (std::string("out") + jobs);
    const auto result = run_cli("tune " + kTiny + " --policy ema_threshold --deployable --seeds 1 --budget 4 -j " +
                                std::string(jobs) + " -o " + out.string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const nlohmann::json ds = nlohmann::json::parse(read_file(out / "ds_config.json"));
    std::set<std::string> keys;
    for (const auto& [key, value] : ds["zero_optimization"].items()) keys.insert(key);
    EXPECT_EQ(keys, (std::set<std::string>{"stage", "stage3_adaptive_prefetch_bucket_size",
                                           "stage3_adaptive_prefetch_min_size", "stage3_adaptive_prefetch_max_size"}));
    const std::string report = read_file(out / "report.md");
    EXPECT_EQ(report.find("DeepSpeed hard-codes"), std::string::npos);
    const std::string all = report + read_file(out / "controller.yaml") + read_file(out / "ds_config.json") +
                            read_file(out / "evaluations.csv") + read_file(out / "candidates.csv");
    if (first.empty()) {
      first = all;
    } else {
      EXPECT_EQ(all, first);
    }
  }
}

TEST(TuneCommand, TuneScenariosRunAsIs) {
  const TempDir dir("tune-scenarios");
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kTune)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    const nlohmann::json summary =
        run_summary(entry.path().string(), {"output.trace=false"}, dir, entry.path().stem().string());
    EXPECT_EQ(summary["status"], "ok") << entry.path();
  }
  EXPECT_GE(count, 4);
}

namespace {

// evaluations.csv's peak_reserved_bytes column (the last), per row.
std::vector<std::int64_t> evaluated_peaks(const fs::path& csv_path) {
  std::ifstream csv(csv_path);
  std::string line;
  std::getline(csv, line);
  std::vector<std::int64_t> peaks;
  while (std::getline(csv, line)) peaks.push_back(std::stoll(line.substr(line.rfind(',') + 1)));
  return peaks;
}

std::string gib_text(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

}  // namespace

// Issue 22: every knob the search changed is run alone against the defaults; the recommendation
// keeps exactly the knobs whose gain beats the defaults' seed spread (or that the cap needs), and
// ds_config.json holds the defaults for the others.
TEST(TuneCommand, AttributionKeepsOnlyKnobsWorthMoreThanTheSeedSpread) {
  const TempDir dir("tune-attr");
  const fs::path out = dir.path() / "out";
  const auto result = run_cli("tune " + kBert + " --policy static --memory-cap 2600MiB --seeds 1 --budget 9 -j 2 -o " +
                              out.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("tune: search: "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("tune: attribution: "), std::string::npos) << result.output;
  const nlohmann::json tuned = nlohmann::json::parse(read_file(out / "tune.json"));
  ASSERT_TRUE(tuned["attribution"].is_array());
  // The cap binds on BERT (the defaults peak above it), so the search must have moved something.
  ASSERT_FALSE(tuned["attribution"].empty()) << tuned.dump(1);
  const double defaults_ns = tuned["scenarios"][0]["deepspeed_default"]["mean_steady_step_ns"];
  const nlohmann::json ds = nlohmann::json::parse(read_file(out / "ds_config.json"))["zero_optimization"];
  const std::string report = read_file(out / "report.md");
  EXPECT_NE(report.find("## What each knob is worth"), std::string::npos) << report;
  for (const auto& knob : tuned["attribution"]) {
    const std::string key = knob["key"];
    const auto& alone = knob["alone"]["bert-base-2x-pcie"];
    const double gain = defaults_ns / alone["mean_steady_step_ns"].get<double>() - 1.0;
    const double spread = alone["defaults_seed_spread"];
    const bool faster = alone["status"] == "ok" && gain > spread;
    EXPECT_EQ(knob["kept"].get<bool>(), faster || knob["kept_for_memory"].get<bool>()) << knob.dump();
    if (!faster) {
      EXPECT_EQ(knob["kept_for_memory"].get<bool>(), knob["kept"].get<bool>()) << knob.dump();
    }
    const std::string expected = knob["kept"].get<bool>() ? knob["tuned"] : knob["default"];
    EXPECT_EQ(std::to_string(ds[key].get<std::int64_t>()), expected) << key;
    EXPECT_NE(report.find("| bert-base-2x-pcie | " + key + " " + knob["default"].get<std::string>() + " -> " +
                          knob["tuned"].get<std::string>() + " alone |"),
              std::string::npos)
        << report;
  }
  // The recommendation itself holds the cap on the held-out seeds.
  for (const auto& row : tuned["scenarios"]) {
    EXPECT_EQ(row["recommended"]["status"], "ok");
    EXPECT_LE(row["recommended"]["peak_reserved_bytes"].get<std::int64_t>(), 2600LL * 1024 * 1024);
  }
}

// A cap below anything reachable: exit 2 naming the lowest peak any simulation reached (the
// smallest peak in evaluations.csv) and, in report.md, what filled memory there. --budget is
// advised only when the budget, not convergence, stopped the search.
TEST(TuneCommand, UnmeetableCapSaysWhatFillsMemoryAndTheLowestPeak) {
  const TempDir dir("tune-cap");
  const fs::path cut = dir.path() / "cut";
  auto result = run_cli("tune " + kTiny + " --policy static --memory-cap 1MiB --seeds 1 --budget 1 -o " + cut.string());
  ASSERT_EQ(result.exit_code, 2) << result.output;
  const auto peaks = evaluated_peaks(cut / "evaluations.csv");
  ASSERT_FALSE(peaks.empty());
  const std::int64_t lowest = *std::min_element(peaks.begin(), peaks.end());
  EXPECT_NE(result.output.find("lowest peak any tried point reached is " + gib_text(lowest) + " GiB"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("a larger --budget"), std::string::npos) << result.output;
  const std::string report = read_file(cut / "report.md");
  for (const char* part : {"model states", "activations", "gathered parameters", "allocator cache",
                           "| tiny-llama-2x-nvlink | " }) {
    EXPECT_NE(report.find(part), std::string::npos) << part << "\n" << report;
  }

  const fs::path converged = dir.path() / "converged";
  result = run_cli("tune " + kTiny + " --policy ema_threshold --deployable --memory-cap 1MiB --seeds 1 --budget 500 -j 2 -o " +
                   converged.string());
  ASSERT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("stopped on its own"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("larger --budget may"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("or a larger --budget"), std::string::npos) << result.output;
}

// A tune stopped part-way (Ctrl-C, scancel, a kill mid-row) continues with --resume from the rows
// it wrote, and ends with the outputs an uninterrupted tune writes, byte for byte (issue 46, D3).
// Without --resume a folder holding a tune's rows is refused rather than overwritten, and rows of
// another tune are refused naming the row.
TEST(TuneCommand, AStoppedTuneResumesToTheSameOutputs) {
  const TempDir dir("tune-resume");
  const std::string args = " --policy ema_threshold --seeds 2 --budget 6 -j 2 -o ";
  const fs::path whole = dir.path() / "whole";
  ASSERT_EQ(run_cli("tune " + kTiny + args + whole.string()).exit_code, 0);
  const std::string rows = read_file(whole / "evaluations.csv");
  const auto lines = std::count(rows.begin(), rows.end(), '\n');
  ASSERT_GT(lines, 8);

  // What a tune killed after its first rows leaves: half its rows and a torn one.
  const fs::path cut = dir.path() / "cut";
  fs::create_directories(cut);
  std::size_t end = 0;
  for (long i = 0; i < lines / 2; ++i) end = rows.find('\n', end) + 1;
  std::ofstream(cut / "evaluations.csv", std::ios::binary) << rows.substr(0, end) << rows.substr(end, 7);

  const auto refused = run_cli("tune " + kTiny + args + cut.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--resume to continue that tune"), std::string::npos) << refused.output;

  const auto resumed = run_cli("tune " + kTiny + args + cut.string() + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("dropped a partial last row"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming: " + std::to_string(lines / 2 - 1) + " evaluation(s)"), std::string::npos)
      << resumed.output;
  for (const char* file : {"evaluations.csv", "candidates.csv", "controller.yaml", "ds_config.json", "report.md"}) {
    EXPECT_EQ(read_file(cut / file), read_file(whole / file)) << file;
  }

  // Another tune's rows (here: another seed count) are not reused.
  const auto other = run_cli("tune " + kTiny + " --policy ema_threshold --seeds 1 --budget 6 -j 2 -o " + cut.string() +
                             " --resume");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("the folder holds another tune"), std::string::npos) << other.output;
}

// SIGINT, SIGTERM or SIGHUP stop a tune after the simulations in flight: exit 130, every finished
// evaluation kept, and the message says how to continue.
TEST(TuneCommand, ASignalStopsATuneKeepingItsRows) {
  const TempDir dir("tune-signal");
  const fs::path out = dir.path() / "out";
  const auto result = run_cli("tune " + kBert + " " + kTiny + " --policy ema_threshold --seeds 3 --budget 400 -j 1 -o " +
                                  out.string(),
                              "timeout --preserve-status -s TERM 1 ");
  if (result.exit_code == 0) GTEST_SKIP() << "the tune finished within a second on this machine";
  EXPECT_EQ(result.exit_code, 130) << result.output;
  EXPECT_NE(result.output.find("--resume` continues"), std::string::npos) << result.output;
  const std::string rows = read_file(out / "evaluations.csv");
  EXPECT_GT(std::count(rows.begin(), rows.end(), '\n'), 1) << rows;
  EXPECT_EQ(rows.back(), '\n');
}

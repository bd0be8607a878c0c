// `prefetchlab sweep` and `prefetchlab merge` through the real binary: a sweep killed with SIGKILL
// part-way and resumed ends with every point exactly once and the rows of an uninterrupted sweep;
// merged shards equal the unsharded sweep byte for byte; -j does not change a byte; a row equals
// what `run` reports for the same point.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/cli_runner.hpp"
#include "core/io/csv_reader.hpp"

extern char** environ;

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kTinyLlama = (fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "tiny-llama-2x-h100.yaml").string();

// 5 x 2 x 6 = 60 points of the smallest scenario: long enough to kill part-way, quick to finish.
// Host jitter makes the seed matter, so every row is its own (at DeepSpeed's host costs the tiny
// run is host-bound: kernel jitter would hardly show).
constexpr const char* kGrid =
    "zero.stage3_prefetch_bucket_size: [1e5, 5e5, 2e6, 1e7, 5e7]\n"
    "zip:\n"
    "  training.micro_batch: [1, 2]\n"
    "  training.seq_len: [512, 256]\n"
    "noise.seed: [1, 2, 3, 4, 5, 6]\n"
    "noise.host_jitter: [0.03]\n";
constexpr std::size_t kGridPoints = 60;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<prefetchlab::core::CsvRecord> rows_of(const fs::path& path) {
  auto csv = prefetchlab::core::parse_csv(read_file(path));
  EXPECT_FALSE(csv.torn_tail) << path;
  EXPECT_FALSE(csv.records.empty()) << path;
  if (!csv.records.empty()) csv.records.erase(csv.records.begin());  // the header
  return std::move(csv.records);
}

std::size_t line_count(const fs::path& path) {
  const std::string text = read_file(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string sweep_args(const fs::path& grid, const fs::path& out, const std::string& extra = "") {
  return "sweep " + kTinyLlama + " --grid " + grid.string() + " -o " + out.string() + " " + extra;
}

// Starts the CLI as a child process (stdout discarded) and returns its pid, or -1.
pid_t spawn_cli(std::vector<std::string> args) {
  args.insert(args.begin(), PREFETCHLAB_CLI);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

// The uninterrupted sweep every other sweep is compared with, run once for the whole file.
class SweepCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_ = new TempDir("sweep-reference");
    grid_ = new fs::path(reference_->write("grid.yaml", kGrid));
    const auto result = run_cli(sweep_args(*grid_, reference_->path() / "out", "-j 2"));
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  static void TearDownTestSuite() {
    delete grid_;
    delete reference_;
  }
  static fs::path reference_results() { return reference_->path() / "out" / "results.csv"; }

  static TempDir* reference_;
  static fs::path* grid_;
};
TempDir* SweepCommand::reference_ = nullptr;
fs::path* SweepCommand::grid_ = nullptr;

TEST_F(SweepCommand, ResultsHaveTheContractColumnsOneRowPerPointInPointOrder) {
  const std::string text = read_file(reference_results());
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "point,zero.stage3_prefetch_bucket_size,training.micro_batch,training.seq_len,noise.seed,"
            "noise.host_jitter,status,"
            "steady_step_time_ns,samples_per_second,tflops_per_gpu,mean_exposed_comm_ns,forward_stall_ns,"
            "backward_stall_ns,peak_allocated_bytes,peak_reserved_bytes,peak_gathered_param_bytes,"
            "final_bucket_numel");
  const auto rows = rows_of(reference_results());
  ASSERT_EQ(rows.size(), kGridPoints);
  for (std::size_t p = 0; p < rows.size(); ++p) {
    EXPECT_EQ(rows[p].fields[0], std::to_string(p));
    EXPECT_EQ(rows[p].fields[6], "ok");
  }
  std::set<std::string> step_times;
  for (const auto& row : rows) step_times.insert(row.fields[7]);
  // Without the seeds mattering there would be at most 5 x 2 distinct step times.
  EXPECT_GT(step_times.size(), 10u) << "the seeds should make rows differ";
  // Grid order: the first key slowest, the zip block one axis, values as the grid spelt them.
  EXPECT_EQ(rows[0].fields[1], "1e5");
  EXPECT_EQ(rows[13].fields[1], "5e5");
  EXPECT_EQ((std::vector<std::string>{rows[13].fields[2], rows[13].fields[3], rows[13].fields[4]}),
            (std::vector<std::string>{"1", "512", "2"}));
  EXPECT_EQ((std::vector<std::string>{rows[59].fields[2], rows[59].fields[3], rows[59].fields[4]}),
            (std::vector<std::string>{"2", "256", "6"}));
  // timings.csv holds the wall times (session 1 only); results.csv no clock at all.
  EXPECT_EQ(line_count(reference_->path() / "out" / "timings.csv"), 1 + kGridPoints);
  const auto manifest = nlohmann::json::parse(read_file(reference_->path() / "out" / "sweep.json"));
  EXPECT_EQ(manifest["points"], kGridPoints);
  EXPECT_EQ(manifest["sessions"], 1);
}

// Without -j, a sweep confined to one CPU (as by a Slurm allocation or taskset) runs one
// simulation at a time, not one per core of the machine; it says its count before the work and
// its progress (rate, ETA) during it; and the thread count does not change a byte.
TEST_F(SweepCommand, ThreadCountFollowsTheAffinityMaskAndDoesNotChangeAByte) {
  TempDir out("sweep-j1");
  const auto result = run_cli(sweep_args(*grid_, out.path() / "out"), "taskset -c 0 ");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("sweep: 60 points (5 x 2 x 6 x 1); 60 of 60 points of the sweep to run on 1 threads\n"),
            std::string::npos)
      << result.output;
  const std::size_t first = result.output.find("sweep: 0/60 points, rate and ETA after the first point\n");
  const std::size_t last = result.output.find("sweep: 60/60 points, ");
  EXPECT_NE(first, std::string::npos) << result.output;
  ASSERT_NE(last, std::string::npos) << result.output;
  EXPECT_LT(first, last);
  EXPECT_NE(result.output.find(" points/s, ETA 0 s\n", last), std::string::npos) << result.output;
  EXPECT_TRUE(read_file(out.path() / "out" / "results.csv") == read_file(reference_results()));
}

TEST_F(SweepCommand, KilledSweepResumesToTheUninterruptedRows) {
  TempDir out("sweep-kill");
  const fs::path dir = out.path() / "out";
  const fs::path results = dir / "results.csv";
  // SIGKILL once some rows (but not all) are on disk. On a machine so loaded that the sweep
  // finished before the kill landed, try again.
  bool killed = false;
  for (int attempt = 0; attempt < 5 && !killed; ++attempt) {
    fs::remove_all(dir);
    const pid_t pid = spawn_cli({"sweep", kTinyLlama, "--grid", grid_->string(), "-o", dir.string(), "-j", "1"});
    ASSERT_GT(pid, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(results) && line_count(results) >= 1 + 3) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    killed = WIFSIGNALED(status) && rows_of(results).size() < kGridPoints;
  }
  ASSERT_TRUE(killed) << "the sweep always finished before it could be killed";
  const std::size_t rows_before = rows_of(results).size();
  ASSERT_GT(rows_before, 0u);
  // What a killed sweep leaves is final: each row is the uninterrupted sweep's row of its point.
  const auto reference = rows_of(reference_results());
  for (const auto& row : rows_of(results)) EXPECT_EQ(row.text, reference[std::stoul(row.fields[0])].text);

  // A kill in the middle of an append leaves a torn last line; resume must drop it.
  { std::ofstream(results, std::ios::app) << "59,5e7,2,256,6,0.03,ok,1234"; }

  const auto resumed = run_cli(sweep_args(*grid_, dir, "-j 2 --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("dropped a partial last row"), std::string::npos) << resumed.output;

  const auto rows = rows_of(results);
  std::set<std::string> points;
  for (const auto& row : rows) EXPECT_TRUE(points.insert(row.fields[0]).second) << "point " << row.fields[0] << " twice";
  EXPECT_EQ(points.size(), kGridPoints);
  EXPECT_TRUE(read_file(results) == read_file(reference_results())) << read_file(results);

  // timings.csv: the first session's points, then only the missing ones in session 2.
  std::map<std::string, std::size_t> per_session;
  std::set<std::string> timed;
  for (const auto& row : rows_of(dir / "timings.csv")) {
    ++per_session[row.fields[1]];
    EXPECT_TRUE(timed.insert(row.fields[0]).second) << "point " << row.fields[0] << " timed twice";
  }
  EXPECT_EQ(per_session["1"], rows_before);
  EXPECT_EQ(per_session["2"], kGridPoints - rows_before);
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "sweep.json"))["sessions"], 2);

  // Resuming a finished sweep runs nothing and changes nothing.
  const std::string before = read_file(results);
  const auto again = run_cli(sweep_args(*grid_, dir, "--resume"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("0 points run"), std::string::npos) << again.output;
  EXPECT_TRUE(read_file(results) == before);
}

TEST_F(SweepCommand, AKillBetweenTimingAndResultRunsThePointAgainTimedOnce) {
  // A point's timing row goes first and its result row commits it. A sweep killed between the
  // two (here: the last two result rows removed from a finished sweep's folder) has timings for
  // points without results; --resume drops those timings and runs the points again.
  TempDir out("sweep-uncommitted");
  const fs::path dir = out.path() / "out";
  fs::copy(reference_->path() / "out", dir, fs::copy_options::recursive);
  fs::remove(dir / "sweep.lock");
  const fs::path results = dir / "results.csv";
  std::string text = read_file(results);
  for (int i = 0; i < 2; ++i) text.erase(text.rfind('\n', text.size() - 2) + 1);
  { std::ofstream(results, std::ios::trunc | std::ios::binary) << text; }
  ASSERT_EQ(rows_of(results).size(), kGridPoints - 2);

  const auto resumed = run_cli(sweep_args(*grid_, dir, "--resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(read_file(results) == read_file(reference_results()));
  std::map<std::string, int> sessions_of_point;
  for (const auto& row : rows_of(dir / "timings.csv")) {
    EXPECT_EQ(sessions_of_point.count(row.fields[0]), 0u) << "point " << row.fields[0] << " timed twice";
    sessions_of_point[row.fields[0]] = std::stoi(row.fields[1]);
  }
  EXPECT_EQ(sessions_of_point.size(), kGridPoints);
  EXPECT_EQ(std::count_if(sessions_of_point.begin(), sessions_of_point.end(),
                          [](const auto& entry) { return entry.second == 2; }),
            2);
}

TEST_F(SweepCommand, ARunningSweepLocksItsFolder) {
  TempDir out("sweep-lock");
  const fs::path dir = out.path() / "out";
  const auto grid = out.write("long.yaml", "training.iterations: [1000000]\n");
  const pid_t pid = spawn_cli({"sweep", kTinyLlama, "--grid", grid.string(), "-o", dir.string()});
  ASSERT_GT(pid, 0);
  // sweep.json is written once the folder is locked.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(dir / "sweep.json") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto second = run_cli(sweep_args(grid, dir, "--resume"));
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("is in use by another running prefetchlab command"), std::string::npos) << second.output;
}

TEST_F(SweepCommand, MergedShardsEqualTheUnshardedSweep) {
  TempDir out("sweep-shards");
  std::string shard_dirs;
  for (int i = 0; i < 3; ++i) {
    const fs::path dir = out.path() / ("shard" + std::to_string(i));
    const auto result = run_cli(sweep_args(*grid_, dir, "-j 2 --shard " + std::to_string(i) + "/3"));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    for (const auto& row : rows_of(dir / "results.csv")) EXPECT_EQ(std::stoul(row.fields[0]) % 3, std::size_t(i));
    shard_dirs.append(" ").append(dir.string());
  }
  const fs::path merged = out.path() / "merged";
  const auto result = run_cli("merge " + merged.string() + shard_dirs);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(read_file(merged / "results.csv") == read_file(reference_results()));

  // Two shards of three: the missing points are an error, or listed with --allow-missing.
  std::string two;
  for (const char* shard : {"shard0", "shard2"}) two.append(" ").append((out.path() / shard).string());
  const auto missing = run_cli("merge " + (out.path() / "partial").string() + two);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("20 of 60 points have no row"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("points 1, 4, 7,"), std::string::npos) << missing.output;
  const auto allowed = run_cli("merge " + (out.path() / "partial").string() + two + " --allow-missing");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_EQ(rows_of(out.path() / "partial" / "results.csv").size(), 40u);
}

TEST_F(SweepCommand, ARowIsWhatRunReportsForThatPoint) {
  const auto rows = rows_of(reference_results());
  const auto& row = rows[37];
  TempDir out("sweep-run");
  const auto result = run_cli("run " + kTinyLlama + " -o " + out.path().string() + " --no-expect" +
                              " --set zero.stage3_prefetch_bucket_size=" + row.fields[1] +
                              " --set training.micro_batch=" + row.fields[2] + " --set training.seq_len=" +
                              row.fields[3] + " --set noise.seed=" + row.fields[4] +
                              " --set noise.host_jitter=" + row.fields[5]);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(row.fields[6], summary["status"].get<std::string>());
  EXPECT_EQ(row.fields[7], std::to_string(summary["steady_step_time_ns"].get<std::int64_t>()));
  EXPECT_EQ(std::stod(row.fields[8]), summary["samples_per_second"].get<double>());
  EXPECT_EQ(std::stod(row.fields[9]), summary["tflops_per_gpu"].get<double>());
  EXPECT_EQ(row.fields[10], std::to_string(summary["mean_exposed_comm_ns"].get<std::int64_t>()));
  EXPECT_EQ(row.fields[11], std::to_string(summary["mean_stall_ns"]["forward"].get<std::int64_t>()));
  EXPECT_EQ(row.fields[12], std::to_string(summary["mean_stall_ns"]["backward"].get<std::int64_t>()));
  EXPECT_EQ(row.fields[13], std::to_string(summary["peak_allocated_bytes"].get<std::int64_t>()));
  EXPECT_EQ(row.fields[14], std::to_string(summary["peak_reserved_bytes"].get<std::int64_t>()));
  EXPECT_EQ(row.fields[15], std::to_string(summary["peak_gathered_param_bytes"].get<std::int64_t>()));
  EXPECT_EQ(row.fields[16], std::to_string(summary["bucket_trajectory_numel"].back().get<std::int64_t>()));
}

TEST_F(SweepCommand, AnOutOfMemoryPointIsARowNotAFailure) {
  TempDir out("sweep-oom");
  const auto grid = out.write("grid.yaml", "training.micro_batch: [2, 16384]\n");
  const auto result = run_cli(sweep_args(grid, out.path() / "out", "-j 2"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto rows = rows_of(out.path() / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].fields[2], "ok");
  EXPECT_EQ(rows[1].fields[2], "oom");
}

TEST_F(SweepCommand, ResumeRefusesAnotherSweepAndAFreshSweepRefusesAUsedFolder) {
  TempDir out("sweep-other");
  const fs::path dir = out.path() / "out";
  const auto small = out.write("small.yaml", "noise.seed: [1, 2]\n");
  ASSERT_EQ(run_cli(sweep_args(small, dir)).exit_code, 0);

  const auto again = run_cli(sweep_args(small, dir));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already holds a sweep"), std::string::npos) << again.output;

  const auto other_grid = out.write("other.yaml", "noise.seed: [1, 3]\n");
  const auto other = run_cli(sweep_args(other_grid, dir, "--resume"));
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("other keys or values"), std::string::npos) << other.output;

  const auto other_scenario = run_cli("sweep " + (fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" /
                                                  "bert-base-qa-2x-rtx4000ada.yaml").string() +
                                      " --grid " + small.string() + " -o " + dir.string() + " --resume");
  EXPECT_EQ(other_scenario.exit_code, 2) << other_scenario.output;
  EXPECT_NE(other_scenario.output.find("scenario"), std::string::npos) << other_scenario.output;

  const auto other_shard = run_cli(sweep_args(small, dir, "--resume --shard 1/2"));
  EXPECT_EQ(other_shard.exit_code, 2) << other_shard.output;
  EXPECT_NE(other_shard.output.find("shard"), std::string::npos) << other_shard.output;

  // Merging shards of different sweeps is refused too.
  const auto mixed = run_cli("merge " + (out.path() / "m").string() + " " + dir.string() + " " +
                             (reference_->path() / "out").string());
  EXPECT_EQ(mixed.exit_code, 2) << mixed.output;
  EXPECT_NE(mixed.output.find("another sweep"), std::string::npos) << mixed.output;
}

}  // namespace

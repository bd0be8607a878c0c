// apps/slurm/ without a cluster: the sbatch options, --shard auto from Slurm's array variables,
// the scripts' text, and `sweep --slurm --submit` against a stand-in `sbatch` on PATH that
// records its arguments. tests/slurm/slurm_sweep_test.sh runs the same under a real Slurm.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apps/slurm/sbatch_options.hpp"
#include "apps/slurm/sbatch_scripts.hpp"
#include "apps/slurm/slurm_array_env.hpp"
#include "apps/slurm/slurm_sweep_plan.hpp"
#include "core/input/input_error.hpp"
#include "tests/support/cli_runner.hpp"

namespace fs = std::filesystem;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace apps = prefetchlab::apps;

namespace {

const std::string kTinyLlama = (fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "tiny-llama-2x-h100.yaml").string();
// 6 points of a few milliseconds each.
constexpr const char* kGrid =
    "training.iterations: [6]\n"
    "zero.stage3_prefetch_bucket_size: [1e5, 2e6, 5e7]\n"
    "noise.seed: [1, 2]\n"
    "noise.host_jitter: [0.03]\n";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The InputError's message for `texts`, or "" when they parse.
std::string option_error(const std::vector<std::string>& texts) {
  try {
    (void)apps::parse_sbatch_options(texts);
  } catch (const prefetchlab::core::InputError& error) {
    return error.what();
  }
  return "";
}

std::string shard_error(const std::map<std::string, std::string>& variables) {
  try {
    (void)apps::shard_from_slurm_array([&](const char* name) -> const char* {
      const auto found = variables.find(name);
      return found == variables.end() ? nullptr : found->second.c_str();
    });
  } catch (const prefetchlab::core::InputError& error) {
    return error.what();
  }
  return "";
}

// A stand-in `sbatch` that appends its arguments to DIR/calls and prints job ids 101, 102, ...
// as `sbatch --parsable` does; exit 1 with a message where DIR/refuse exists.
fs::path write_fake_sbatch(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path script = dir / "sbatch";
  std::ofstream(script) << "#!/bin/sh\n"
                           "here=$(dirname \"$0\")\n"
                           "if [ -e \"$here/refuse\" ]; then echo 'sbatch: error: invalid partition specified: nope' >&2; exit 1; fi\n"
                           "echo \"$*\" >>\"$here/calls\"\n"
                           "n=$(wc -l <\"$here/calls\")\n"
                           "echo \"sbatch: warning: a warning before the id\"\n"
                           "echo $((100 + n))\n";
  fs::permissions(script, fs::perms::owner_all);
  return dir;
}

}  // namespace

TEST(SbatchOptions, ParsesKeyValuePairsAndRefusesWhatTheScriptsSetOrCannotHold) {
  const auto options = apps::parse_sbatch_options({"partition=gpu", "--time=01:00:00", "cpus-per-task=4"});
  ASSERT_EQ(options.size(), 3u);
  EXPECT_EQ(options[0], (apps::SbatchOption{"partition", "gpu"}));
  EXPECT_EQ(options[1], (apps::SbatchOption{"time", "01:00:00"}));
  // The merge job runs one short pass: it keeps all but the per-task sizes.
  const auto merge = apps::merge_job_options(options);
  ASSERT_EQ(merge.size(), 2u);
  EXPECT_EQ(merge[1].key, "time");

  EXPECT_NE(option_error({"partition"}).find("has no '='"), std::string::npos);
  EXPECT_NE(option_error({"Partition=gpu"}).find("is not an sbatch option name"), std::string::npos);
  EXPECT_NE(option_error({"time="}).find("has an empty value"), std::string::npos);
  EXPECT_NE(option_error({"comment=a\nb"}).find("line break"), std::string::npos);
  EXPECT_NE(option_error({"array=0-3"}).find("set by prefetchlab itself"), std::string::npos);
  EXPECT_NE(option_error({"dependency=afterok:1"}).find("set by prefetchlab itself"), std::string::npos);
  EXPECT_NE(option_error({"qos=low", "qos=high"}).find("is given twice"), std::string::npos);
  // Every message names the flag and the form expected.
  EXPECT_NE(option_error({"partition"}).find("--slurm-opt partition"), std::string::npos);
  EXPECT_NE(option_error({"partition"}).find("K=V"), std::string::npos);
}

TEST(SlurmArrayEnv, ShardAutoIsTheTaskOfAWholeArrayAndNothingElse) {
  const std::map<std::string, std::string> task{{"SLURM_ARRAY_TASK_ID", "2"},
                                                {"SLURM_ARRAY_TASK_COUNT", "3"},
                                                {"SLURM_ARRAY_TASK_MIN", "0"},
                                                {"SLURM_ARRAY_TASK_MAX", "2"}};
  const auto shard = apps::shard_from_slurm_array([&](const char* name) { return task.at(name).c_str(); });
  EXPECT_EQ(shard.index, 2u);
  EXPECT_EQ(shard.count, 3u);

  EXPECT_NE(shard_error({}).find("is not set: this is not a Slurm array task"), std::string::npos);
  auto bad = task;
  bad["SLURM_ARRAY_TASK_COUNT"] = "three";
  EXPECT_NE(shard_error(bad).find("'three', not a whole number"), std::string::npos);
  // A re-submitted subset (tasks 1 and 4 of a 5-shard sweep): the array does not know N.
  const std::map<std::string, std::string> subset{{"SLURM_ARRAY_TASK_ID", "4"},
                                                  {"SLURM_ARRAY_TASK_COUNT", "2"},
                                                  {"SLURM_ARRAY_TASK_MIN", "1"},
                                                  {"SLURM_ARRAY_TASK_MAX", "4"}};
  const std::string error = shard_error(subset);
  EXPECT_NE(error.find("the shard count is unknown"), std::string::npos) << error;
  EXPECT_NE(error.find("--shard $SLURM_ARRAY_TASK_ID/N"), std::string::npos) << error;
}

TEST(SbatchScripts, QuotesForBashAndRunsEachShardOfTheWholeSweep) {
  EXPECT_EQ(apps::shell_quote("/opt/run-1/a_b.yaml"), "/opt/run-1/a_b.yaml");
  EXPECT_EQ(apps::shell_quote("my runs/x.yaml"), "'my runs/x.yaml'");
  EXPECT_EQ(apps::shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(apps::shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(apps::shell_quote(""), "''");

  apps::SlurmSweepPlan plan;
  plan.sweep.points = 40;
  plan.shards = 8;
  plan.prefetchlab = "/opt/prefetchlab/bin/prefetchlab";
  plan.scenario = "/home/me/my runs/llama.yaml";
  plan.grid = "/home/me/grid.yaml";
  plan.sbatch_options = apps::parse_sbatch_options({"partition=cpu", "cpus-per-task=4"});
  const fs::path dir = "/scratch/sweep";
  // A re-submission of shards 1, 4, 5 and 6.
  const std::string array = apps::sweep_array_script(plan, dir, {1, 4, 5, 6});
  EXPECT_EQ(array.rfind("#!/bin/bash\n", 0), 0u) << array;
  EXPECT_NE(array.find("#SBATCH --array=1,4-6\n"), std::string::npos) << array;
  EXPECT_NE(array.find("#SBATCH --output=/scratch/sweep/slurm/logs/shard-%a.out\n"), std::string::npos) << array;
  EXPECT_NE(array.find("#SBATCH --open-mode=append\n"), std::string::npos) << array;
  EXPECT_NE(array.find("#SBATCH --partition=cpu\n#SBATCH --cpus-per-task=4\n"), std::string::npos) << array;
  // N is written out: SLURM_ARRAY_TASK_COUNT would be 4 here.
  EXPECT_NE(array.find("exec /opt/prefetchlab/bin/prefetchlab sweep '/home/me/my runs/llama.yaml' --grid "
                       "/home/me/grid.yaml -o /scratch/sweep/shards/\"$shard\" --shard \"$shard/8\" --resume -j "
                       "\"${SLURM_CPUS_PER_TASK:-1}\"\n"),
            std::string::npos)
      << array;
  // Every #SBATCH line comes before the first command (sbatch stops reading them there).
  EXPECT_LT(array.rfind("#SBATCH"), array.find("set -euo pipefail")) << array;

  const std::string merge = apps::sweep_merge_script(plan, dir);
  EXPECT_NE(merge.find("#SBATCH --partition=cpu\n"), std::string::npos) << merge;
  EXPECT_EQ(merge.find("cpus-per-task"), std::string::npos) << merge;
  EXPECT_NE(merge.find("sweep-status --no-squeue /scratch/sweep\n"), std::string::npos) << merge;
  EXPECT_NE(merge.find("merge /scratch/sweep /scratch/sweep/shards/0 /scratch/sweep/shards/1"), std::string::npos) << merge;
  EXPECT_NE(merge.find("/scratch/sweep/shards/7\n"), std::string::npos) << merge;
  EXPECT_EQ(merge.find("/scratch/sweep/shards/8"), std::string::npos) << merge;
}

TEST(SweepSlurm, FlagsThatCannotGoTogetherAreBadInput) {
  const TempDir dir("slurm-flags");
  const auto grid = dir.write("grid.yaml", kGrid);
  const std::string base = "sweep " + kTinyLlama + " --grid " + grid.string() + " -o " + (dir.path() / "out").string();
  const auto expect_bad = [&](const std::string& extra, const std::string& words) {
    const auto result = run_cli(base + " " + extra);
    EXPECT_EQ(result.exit_code, 2) << extra << "\n" << result.output;
    EXPECT_NE(result.output.find(words), std::string::npos) << extra << "\n" << result.output;
  };
  expect_bad("--submit", "is given without --slurm");
  expect_bad("--shards 3", "is given without --slurm");
  expect_bad("--slurm-opt partition=cpu", "is given without --slurm");
  expect_bad("--slurm --shard 0/2", "runs every shard as an array task");
  expect_bad("--slurm -j 4", "--slurm-opt cpus-per-task=N");
  expect_bad("--slurm --shards 7", "1 to the grid's 6 points");
  expect_bad("--slurm --slurm-opt output=x.log", "set by prefetchlab itself");
  expect_bad("--shard auto", "this is not a Slurm array task");
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "slurm" / "plan.json"));
}

// --submit: the array first, then the merge with afterany on the array's id; both in jobs.csv.
// Shards run here by hand (as the tasks would), one left out: merge names it, and --resume
// submits only it. A refusing sbatch is an error with sbatch's own words.
TEST(SweepSlurm, SubmitsTheArrayThenTheMergeAndResumeSubmitsOnlyWhatIsMissing) {
  const TempDir dir("slurm-submit");
  const auto grid = dir.write("grid.yaml", kGrid);
  const fs::path out = dir.path() / "out";
  const fs::path bin = write_fake_sbatch(dir.path() / "bin");
  const std::string path_prefix = "PATH=" + bin.string() + ":$PATH ";
  const std::string base = "sweep " + kTinyLlama + " --grid " + grid.string() + " -o " + out.string();

  const auto submitted = run_cli(base + " --slurm --shards 3 --slurm-opt partition=cpu --submit", path_prefix);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(submitted.output.find("submitted: array job 101 (tasks 0-2), merge job 102 after it"), std::string::npos)
      << submitted.output;
  std::string calls = read_file(bin / "calls");
  EXPECT_EQ(calls, "--parsable " + (out / "slurm" / "array.sbatch").string() + "\n--parsable --dependency=afterany:101 " +
                       (out / "slurm" / "merge.sbatch").string() + "\n");
  EXPECT_EQ(read_file(out / "slurm" / "jobs.csv"), "array_job,tasks,merge_job\n101,0-2,102\n");
  EXPECT_NE(read_file(out / "slurm" / "array.sbatch").find("#SBATCH --partition=cpu"), std::string::npos);

  // Tasks 0 and 2 run; task 1 never starts.
  for (const int shard : {0, 2}) {
    const auto task = run_cli(base.substr(0, base.find(" -o ")) + " -o " + (out / "shards" / std::to_string(shard)).string() +
                              " --shard auto",
                              "SLURM_ARRAY_TASK_ID=" + std::to_string(shard) +
                                  " SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=2 ");
    ASSERT_EQ(task.exit_code, 0) << task.output;
  }
  const auto status = run_cli("sweep-status --no-squeue " + out.string());
  EXPECT_NE(status.output.find("4 of 6 points"), std::string::npos) << status.output;
  std::string merge_args = "merge " + out.string();
  for (int shard = 0; shard < 3; ++shard) merge_args += " " + (out / "shards" / std::to_string(shard)).string();
  const auto merged = run_cli(merge_args);
  EXPECT_NE(merged.exit_code, 0) << merged.output;
  EXPECT_NE(merged.output.find("never started"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("by shard: 1/3 misses 2"), std::string::npos) << merged.output;
  EXPECT_FALSE(fs::exists(out / "results.csv"));

  const auto resumed = run_cli(base + " --slurm --resume --submit", path_prefix);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("4 of 6 points have rows"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("submitted: array job 103 (tasks 1), merge job 104 after it"), std::string::npos)
      << resumed.output;
  const std::string array = read_file(out / "slurm" / "array.sbatch");
  EXPECT_NE(array.find("#SBATCH --array=1\n"), std::string::npos) << array;
  EXPECT_NE(array.find("#SBATCH --partition=cpu"), std::string::npos) << "the plan's options are kept:\n" << array;
  EXPECT_EQ(read_file(out / "slurm" / "jobs.csv"), "array_job,tasks,merge_job\n101,0-2,102\n103,1,104\n");

  // With every shard complete, only the merge is submitted, without a dependency.
  const auto last = run_cli(base.substr(0, base.find(" -o ")) + " -o " + (out / "shards" / "1").string() + " --shard 1/3");
  ASSERT_EQ(last.exit_code, 0) << last.output;
  const auto merge_only = run_cli(base + " --slurm --resume --submit", path_prefix);
  ASSERT_EQ(merge_only.exit_code, 0) << merge_only.output;
  EXPECT_NE(merge_only.output.find("every shard is complete"), std::string::npos) << merge_only.output;
  EXPECT_NE(merge_only.output.find("submitted: merge job 105"), std::string::npos) << merge_only.output;
  calls = read_file(bin / "calls");
  EXPECT_EQ(calls.substr(calls.rfind("--parsable")), "--parsable " + (out / "slurm" / "merge.sbatch").string() + "\n");

  std::ofstream(bin / "refuse") << "";
  const auto refused = run_cli(base + " --slurm --resume --submit", path_prefix);
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("invalid partition specified: nope"), std::string::npos) << refused.output;
}

// Hostile folder names never reach a batch script (issue 46, S3): a newline in -o would end an
// #SBATCH line or a comment and run what follows; a blank would cut #SBATCH --output short.
TEST(SbatchScripts, FolderNamesThatWouldLeaveTheirLineAreRefused) {
  TempDir dir("slurm-hostile");
  const std::string root = PREFETCHLAB_SOURCE_DIR;
  const auto grid = dir.path() / "grid.yaml";
  std::ofstream(grid) << "noise.seed: [1, 2]\n";
  for (const std::string name : {"out\ntouch pwned", "out\rx", "out dir", "out\"x", "out'x"}) {
    SCOPED_TRACE(name);
    const fs::path out = dir.path() / name;
    const auto r = run_cli("sweep " + root + "/scenarios/tiny-llama-2x-h100.yaml --grid " + grid.string() + " -o '" +
                           (name.find('\'') == std::string::npos ? out.string() : dir.path().string() + "/out'\\''x") +
                           "' --slurm");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("-o"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out / "slurm")) << "a script was written";
  }
  EXPECT_THROW(apps::check_script_path("/a/b\nc", "scenario", false), prefetchlab::core::InputError);
  EXPECT_NO_THROW(apps::check_script_path("/a/my runs/b.yaml", "scenario", false));
}

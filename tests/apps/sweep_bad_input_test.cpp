// Bad sweep input through the real command line: exit code 2, one line naming the grid file, the
// line and the key with the expected form — before any point runs or the output folder exists.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/cli_runner.hpp"

namespace {

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

const std::string kScenario = (fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "tiny-llama-2x-h100.yaml").string();

struct BadSweepCase {
  std::string name;
  std::string grid;        // grid.yaml's text
  std::string extra_args;  // e.g. --shard
  std::string where;       // "grid.yaml:LINE" or "--shard TEXT"
  std::string key;         // expected as "key '<key>'"; empty if none
  std::string problem;     // a part of the message
  std::string suggestion;  // expected "did you mean '<suggestion>'"; empty if none
};

// A YAML flow list of the numbers 1..n.
std::string numbers(int n) {
  std::string text = "[";
  for (int i = 1; i <= n; ++i) text += (i > 1 ? ", " : "") + std::to_string(i);
  return text + "]";
}

// 1000 x 1000 x 1000 = 1e9 points, every value valid: refused up front with its count, before any
// point is checked.
const std::string kBillionPointGrid = "noise.seed: " + numbers(1000) + "\nzero.stage3_max_live_parameters: " +
                                      numbers(1000) + "\nzero.stage3_prefetch_bucket_size: " + numbers(1000) + "\n";

void PrintTo(const BadSweepCase& c, std::ostream* os) { *os << c.name; }

std::vector<BadSweepCase> cases() {
  return {
      {"unknown_key", "noise.seed: [1, 2]\nzero.stage3_prefetch_bucket_sise: [1e6, 5e6]\n", "", "grid.yaml:2",
       "zero.stage3_prefetch_bucket_sise", "is not a known key", "stage3_prefetch_bucket_size"},
      {"unknown_section", "noize.seed: [1, 2]\n", "", "grid.yaml:1", "noize", "is not a known key", "noise"},
      {"non_list_value", "noise.seed: [1, 2]\nzero.stage3_prefetch_bucket_size: 5e7\n", "", "grid.yaml:2",
       "zero.stage3_prefetch_bucket_size", "is '5e7', not a list", ""},
      {"map_value", "noise: {seed: [1, 2]}\n", "", "grid.yaml:1", "noise", "is a mapping", ""},
      {"empty_list", "noise.seed: []\n", "", "grid.yaml:1", "noise.seed", "is an empty list", ""},
      {"zip_unequal_lengths",
       "noise.seed: [1]\nzip:\n  training.micro_batch: [1, 2, 4]\n  training.seq_len: [512, 256]\n", "",
       "grid.yaml:4", "training.seq_len", "has 2 values but training.micro_batch has 3", ""},
      {"zip_not_a_map", "zip: [1, 2]\n", "", "grid.yaml:1", "zip", "is not a list", ""},
      {"key_twice", "noise.seed: [1]\nzip:\n  noise.seed: [2]\n", "", "grid.yaml:3", "noise.seed", "appears twice",
       ""},
      // A bad value in the last point still stops the sweep before the first point runs.
      {"bad_value_in_block_list", "noise.seed: [1, 2]\ntraining.seq_len:\n  - 256\n  - abc\n", "", "grid.yaml:4",
       "training.seq_len", "is 'abc' (grid point 1)", ""},
      {"value_out_of_range", "training.micro_batch: [2, -1]\n", "", "grid.yaml:1", "training.micro_batch",
       "grid point 1", ""},
      {"not_yaml", "noise.seed: [1, 2\n", "", "grid.yaml:", "", "is not valid YAML", ""},
      {"empty_grid", "# nothing\n", "", "grid.yaml:1", "", "is empty", ""},
      {"shard_without_slash", "noise.seed: [1]\n", "--shard 3", "--shard 3", "", "is not of the form i/N", ""},
      {"shard_index_too_large", "noise.seed: [1]\n", "--shard 3/3", "--shard 3/3", "", "not below N = 3", ""},
      {"shard_zero_count", "noise.seed: [1]\n", "--shard 0/0", "--shard 0/0", "", "has N = 0 shards", ""},
      {"shard_not_numbers", "noise.seed: [1]\n", "--shard a/b", "--shard a/b", "", "is not two whole numbers", ""},
      {"billion_points", kBillionPointGrid, "", "grid.yaml:1", "",
       "has 1000000000 points (1000 x 1000 x 1000), more than the 1000000 a sweep starts without --yes", ""},
      // --yes lifts only the refusal: every point is still checked first (here point 0's is bad).
      {"billion_points_with_yes", "training.micro_batch: [-1]\n" + kBillionPointGrid, "--yes", "grid.yaml:1",
       "training.micro_batch", "grid point 0", ""},
      {"shard_negative", "noise.seed: [1]\n", "--shard -1/2", "--shard -1/2", "", "is not two whole numbers", ""},
  };
}

class BadSweepInput : public ::testing::TestWithParam<BadSweepCase> {};

TEST_P(BadSweepInput, ExitsWithCode2NamingGridLineKeyAndWritesNothing) {
  const BadSweepCase& c = GetParam();
  TempDir dir("bad-sweep");
  const auto grid = dir.write("grid.yaml", c.grid);
  const fs::path out = dir.path() / "out";
  const auto result =
      run_cli("sweep " + kScenario + " --grid " + grid.string() + " -o " + out.string() + " " + c.extra_args);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(c.where), std::string::npos) << "expected '" << c.where << "' in: " << result.output;
  if (!c.key.empty()) {
    EXPECT_NE(result.output.find("key '" + c.key + "'"), std::string::npos) << result.output;
  }
  EXPECT_NE(result.output.find(c.problem), std::string::npos) << "expected '" << c.problem << "' in: " << result.output;
  if (!c.suggestion.empty()) {
    EXPECT_NE(result.output.find("did you mean '" + c.suggestion + "'"), std::string::npos) << result.output;
  }
  EXPECT_NE(result.output.find("expected"), std::string::npos) << result.output;
  // One line, after the "sweep: checking all N points" a grid of 10,000 points or more says first.
  std::string message = result.output;
  if (message.rfind("sweep: checking all ", 0) == 0) message.erase(0, message.find('\n') + 1);
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << result.output;
  EXPECT_FALSE(fs::exists(out)) << "bad input must not create the output folder";
}

std::string case_name(const ::testing::TestParamInfo<BadSweepCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Grid, BadSweepInput, ::testing::ValuesIn(cases()), case_name);

}  // namespace

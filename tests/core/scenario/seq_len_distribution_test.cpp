// training.seq_len as a distribution (issue 23, item 3): every form it reads, every mistake it
// refuses (file, line, key, expected form; exit code 2 on the command line), and the lengths it
// draws (same seed, same lengths).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/input/input_error.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/seq_len_distribution.hpp"
#include "tests/support/cli_runner.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const pc::BundledData kBundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);

// tiny-llama (2048 positions) with `seq_len` written on line 3 as given.
std::string tiny(const std::string& seq_len) {
  return "model: tiny-llama\n"
         "training:\n"
         "  seq_len: " + seq_len + "\n"
         "  micro_batch: 2\n"
         "  iterations: 6\n"
         "cluster: {hardware: h100-sxm-8x, gpus_per_node: 2}\n"
         "noise: {seed: 7}\n";
}

pc::Scenario load_in(const TempDir& dir, const std::string& text) {
  return pc::load_scenario(dir.write("s.yaml", text), {}, kBundled);
}

pc::Scenario load(const std::string& text) {
  TempDir dir("seq-len");
  return load_in(dir, text);
}

// The load fails with an InputError on `key` at `line` whose text holds `words`.
void expect_error_in(const TempDir& dir, const std::string& text, const std::string& key, int line,
                     const std::string& words) {
  try {
    load_in(dir, text);
    FAIL() << "expected an InputError on " << key << " for:\n" << text;
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

void expect_error(const std::string& text, const std::string& key, int line, const std::string& words) {
  TempDir dir("seq-len-bad");
  expect_error_in(dir, text, key, line, words);
}

}  // namespace

TEST(SeqLenDistribution, FixedLengthReadsAsBefore) {
  const auto s = load(tiny("256"));
  EXPECT_EQ(s.training.seq_len, 256);
  EXPECT_EQ(s.training.seq_len_distribution.kind, pc::SeqLenKind::kFixed);
  EXPECT_FALSE(s.training.seq_len_distribution.varies());
  EXPECT_EQ(s.training.seq_len_distribution.draw(7, 3), (std::vector<std::int64_t>{256, 256, 256}));
  EXPECT_EQ(s.training.seq_len_distribution.to_json(), 256);
  EXPECT_EQ(s.training.seq_len_distribution.text(), "256");
}

TEST(SeqLenDistribution, ReadsEveryForm) {
  const auto uniform = load(tiny("{uniform: [128, 512]}"));
  EXPECT_EQ(uniform.training.seq_len_distribution.kind, pc::SeqLenKind::kUniform);
  EXPECT_EQ(uniform.training.seq_len, 512);  // the longest: memory planning stays conservative
  EXPECT_TRUE(uniform.training.seq_len_distribution.varies());

  const auto choices = load(tiny("{choices: [512, 128], weights: [1, 3]}"));
  EXPECT_EQ(choices.training.seq_len_distribution.kind, pc::SeqLenKind::kChoices);
  EXPECT_EQ(choices.training.seq_len, 512);
  EXPECT_EQ(choices.training.seq_len_distribution.weights, (std::vector<double>{1, 3}));
  EXPECT_EQ(choices.training.seq_len_distribution.text(), "choices 512 (25%), 128 (75%)");

  const auto equal = load(tiny("{choices: [64, 1024]}"));
  EXPECT_EQ(equal.training.seq_len_distribution.weights, (std::vector<double>{1, 1}));

  const auto packed = load(tiny("{packed: 1024}"));
  EXPECT_EQ(packed.training.seq_len_distribution.kind, pc::SeqLenKind::kPacked);
  EXPECT_EQ(packed.training.seq_len, 1024);
  EXPECT_FALSE(packed.training.seq_len_distribution.varies());
  EXPECT_EQ(packed.training.seq_len_distribution.draw(1, 2), (std::vector<std::int64_t>{1024, 1024}));

  // A file beside the scenario, cycled past its end; blanks around a number are allowed.
  TempDir dir("seq-len-file");
  dir.write("lengths.txt", "100\n 200 \r\n300\n");
  const auto file = load_in(dir, tiny("{file: lengths.txt}"));
  EXPECT_EQ(file.training.seq_len_distribution.kind, pc::SeqLenKind::kFile);
  EXPECT_EQ(file.training.seq_len, 300);
  EXPECT_EQ(file.training.seq_len_distribution.draw(0, 7),
            (std::vector<std::int64_t>{100, 200, 300, 100, 200, 300, 100}));
  EXPECT_EQ(file.training.seq_len_distribution.to_json()["lines"], 3);

  // Only varies when two different lengths can be drawn.
  EXPECT_FALSE(load(tiny("{uniform: [256, 256]}")).training.seq_len_distribution.varies());
  EXPECT_FALSE(load(tiny("{choices: [256, 512], weights: [1, 0]}")).training.seq_len_distribution.varies());
  EXPECT_EQ(load(tiny("{choices: [256, 512], weights: [1, 0]}")).training.seq_len, 256);
}

TEST(SeqLenDistribution, SameSeedSameLengthsAndTheDrawsFollowTheDistribution) {
  const auto a = load(tiny("{uniform: [100, 110]}"));
  const auto lengths = a.training.seq_len_distribution.draw(7, 2000);
  EXPECT_EQ(lengths, load(tiny("{uniform: [100, 110]}")).training.seq_len_distribution.draw(7, 2000));
  EXPECT_NE(lengths, a.training.seq_len_distribution.draw(8, 2000));
  std::set<std::int64_t> seen(lengths.begin(), lengths.end());
  EXPECT_EQ(seen.size(), 11u);  // every integer of [100, 110], both ends included
  EXPECT_EQ(*seen.begin(), 100);
  EXPECT_EQ(*seen.rbegin(), 110);

  const auto weighted = load(tiny("{choices: [128, 512], weights: [3, 1]}")).training.seq_len_distribution.draw(7, 4000);
  const auto shorts = std::count(weighted.begin(), weighted.end(), 128);
  EXPECT_EQ(shorts + std::count(weighted.begin(), weighted.end(), 512), 4000);
  EXPECT_NEAR(static_cast<double>(shorts) / 4000, 0.75, 0.03);
}

TEST(SeqLenDistribution, BadInputNamesFileLineKeyAndForm) {
  // Line 3 holds seq_len; list items and their own lines, where they are on one.
  expect_error(tiny("0"), "training.seq_len", 3, "[1, 2048]");
  expect_error(tiny("-5"), "training.seq_len", 3, "[1, 2048]");
  expect_error(tiny("4096"), "training.seq_len", 3, "[1, 2048]");  // over the model's positions
  expect_error(tiny("[1, 2]"), "training.seq_len", 3, "{uniform: [min, max]}");
  expect_error(tiny("{unifrom: [1, 2]}"), "training.seq_len.unifrom", 3, "uniform");
  expect_error(tiny("{}"), "training.seq_len", 3, "names no form");
  expect_error(tiny("{uniform: [1, 2], packed: 4}"), "training.seq_len", 3, "names 2 forms");
  expect_error(tiny("{uniform: [0, 512]}"), "training.seq_len.uniform", 3, "'0' is not a length");
  expect_error(tiny("{uniform: [-1, 512]}"), "training.seq_len.uniform", 3, "'-1' is not a length");
  expect_error(tiny("{uniform: [512, 128]}"), "training.seq_len.uniform", 3, "min 512 above max 128");
  expect_error(tiny("{uniform: [128]}"), "training.seq_len.uniform", 3, "has 1 values");
  expect_error(tiny("{choices: []}"), "training.seq_len.choices", 3, "empty list");
  expect_error(tiny("{choices: [128, 0]}"), "training.seq_len.choices", 3, "'0' is not a length");
  expect_error(tiny("{choices: [128, 256], weights: [1]}"), "training.seq_len.weights", 3, "has 1 values for 2 choices");
  expect_error(tiny("{choices: [128, 256], weights: [1, -2]}"), "training.seq_len.weights", 3, "'-2' is not a weight >= 0");
  expect_error(tiny("{choices: [128, 256], weights: [0, 0]}"), "training.seq_len.weights", 3, "all 0");
  expect_error(tiny("{weights: [1]}"), "training.seq_len", 3, "names no form");
  expect_error(tiny("{packed: 0}"), "training.seq_len.packed", 3, "[1, 2048]");
  expect_error(tiny("{file: missing.txt}"), "training.seq_len.file", 3, "cannot be read");
  // A list item on its own line is named there.
  expect_error("model: tiny-llama\ntraining:\n  micro_batch: 1\n  seq_len:\n    choices:\n      - 128\n      - 0\n"
               "cluster: {hardware: h100-sxm-8x, gpus_per_node: 2}\n",
               "training.seq_len.choices", 7, "'0' is not a length");
}

TEST(SeqLenDistribution, BadLengthsFileNamesItsFileAndLine) {
  TempDir dir("seq-len-file-bad");
  dir.write("bad.txt", "128\n256\n12x\n");
  try {
    load_in(dir, tiny("{file: bad.txt}"));
    FAIL() << "a bad line was read";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), "training.seq_len.file");
    EXPECT_EQ(e.where().file, (dir.path() / "bad.txt").string());
    EXPECT_EQ(e.where().line, 3);
    EXPECT_NE(std::string(e.what()).find("'12x'"), std::string::npos) << e.what();
  }
  dir.write("long.txt", "128\n9999\n");
  expect_error_in(dir, tiny("{file: long.txt}"), "training.seq_len.file", 2, "'9999' is not a length");
  dir.write("hole.txt", "128\n\n256\n");
  expect_error_in(dir, tiny("{file: hole.txt}"), "training.seq_len.file", 2, "line 2 is empty");
  dir.write("empty.txt", "");
  expect_error_in(dir, tiny("{file: empty.txt}"), "training.seq_len.file", 3, "holds no lengths");
}

// On the command line every one of these is exit code 2, the message naming the key.
TEST(SeqLenDistribution, CommandLineExitsWithTwoNamingTheKey) {
  TempDir dir("seq-len-cli");
  const std::map<std::string, std::string> cases = {
      {"{uniform: [512, 128]}", "training.seq_len.uniform"},
      {"{choices: [128, 256], weights: [1, 2, 3]}", "training.seq_len.weights"},
      {"{choices: [128, 256], weights: [1, -1]}", "training.seq_len.weights"},
      {"{file: nowhere.txt}", "training.seq_len.file"},
      {"{packd: 128}", "training.seq_len.packd"},
      {"-3", "training.seq_len"},
  };
  for (const auto& [value, key] : cases) {
    const auto scenario = dir.write("s.yaml", tiny(value));
    const auto result = run_cli("run " + scenario.string() + " -o " + (dir.path() / "out").string());
    EXPECT_EQ(result.exit_code, 2) << value << "\n" << result.output;
    EXPECT_NE(result.output.find(key), std::string::npos) << value << "\n" << result.output;
    EXPECT_NE(result.output.find("s.yaml"), std::string::npos) << value << "\n" << result.output;
  }
  // Written by --set: the error points at the --set, not at the file's seq_len.
  const auto plain = dir.write("s.yaml", tiny("256"));
  const auto set = run_cli("run " + plain.string() + " -o " + (dir.path() / "out").string() +
                           " --set 'training.seq_len={uniform: [512, 64]}'");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("--set training.seq_len"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("training.seq_len.uniform"), std::string::npos) << set.output;
  dir.write("bad.txt", "128\nabc\n");
  const auto scenario = dir.write("s.yaml", tiny("{file: bad.txt}"));
  const auto result = run_cli("describe " + scenario.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("bad.txt:2"), std::string::npos) << result.output;
}

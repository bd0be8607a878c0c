// Sequence lengths that change (issue 23, item 3) through the command line: docs/scenarios.md's
// compare table is the command's own output (PREFETCHLAB_UPDATE_DOCS=1 rewrites it), the claim
// above it (the best static bucket differs between the two lengths) holds, and `run` writes the
// per-iteration length and says the steady step is a mean, only where lengths vary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tests/support/cli_runner.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = PREFETCHLAB_SOURCE_DIR;
const fs::path kScenario = kRoot / "scenarios" / "llama-2-13b-variable-seq-len.yaml";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The configuration of the "best static (...)" row of a compare table.
std::string best_static(const std::string& table) {
  std::smatch m;
  if (!std::regex_search(table, m, std::regex(R"(\| best static \(([^)]+)\) \|)"))) return "";
  return m[1];
}

}  // namespace

TEST(VariableSeqLen, DocsCompareTableIsTheCommandsOutput) {
  TempDir dir("variable-seq-len-doc");
  const auto table_file = dir.path() / "table.md";
  const auto result = run_cli("compare " + kScenario.string() + " -o " + table_file.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string table = read_file(table_file);
  const fs::path doc_path = kRoot / "docs" / "scenarios.md";
  std::string doc = read_file(doc_path);
  const std::string begin = "<!-- variable-seq-len:begin -->\n";
  const std::string end = "<!-- variable-seq-len:end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string current = doc.substr(b + begin.size(), e - b - begin.size());
  if (current != table && std::getenv("PREFETCHLAB_UPDATE_DOCS")) {
    doc.replace(b + begin.size(), e - b - begin.size(), table);
    std::ofstream(doc_path, std::ios::binary) << doc;
    return;
  }
  EXPECT_EQ(current, table) << "docs/scenarios.md's variable-seq-len table is stale: rerun with PREFETCHLAB_UPDATE_DOCS=1";
  // What the text under it says.
  EXPECT_EQ(best_static(table), "2.05e+08") << table;
  EXPECT_NE(table.find("| pace_search | 5e+07 | 2e+08 |"), std::string::npos) << table;
}

// The README's claim: alone, 512-token batches prefer 2.048e8, 4096-token ones 5.12e7.
TEST(VariableSeqLen, BestStaticBucketDiffersBetweenTheLengths) {
  TempDir dir("variable-seq-len-best");
  const std::string text = read_file(kScenario);
  const std::string mix = "seq_len: {choices: [512, 4096]}";
  const auto at = text.find(mix);
  ASSERT_NE(at, std::string::npos) << "the scenario's seq_len line moved";
  std::map<int, std::string> best;
  for (const int length : {512, 4096}) {
    std::string fixed = text;
    fixed.replace(at, mix.size(), "seq_len: " + std::to_string(length));
    const auto file = dir.write("fixed" + std::to_string(length) + ".yaml", fixed);
    const auto result = run_cli("compare " + file.string() + " --iterations 8 --policies ema_threshold");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    best[length] = best_static(result.output);
  }
  EXPECT_EQ(best[512], "2.05e+08");
  EXPECT_EQ(best[4096], "5.12e+07");
}

// iterations.csv's seq_len column and summary.json's flag appear only where lengths vary; the
// same scenario and seed give the same bytes.
TEST(VariableSeqLen, RunWritesEachIterationsLengthOnlyWhereLengthsVary) {
  TempDir dir("variable-seq-len-run");
  const std::string tiny = (kRoot / "scenarios" / "tiny-llama-2x-h100.yaml").string();
  const std::string quiet = " --set output.trace=false --set output.memory_timeline=false";
  const std::string mix = " --set 'training.seq_len={choices: [128, 256], weights: [1, 3]}' --set training.iterations=12";
  for (const std::string out : {"a", "b"}) {
    const auto run = run_cli("run " + tiny + " -o " + (dir.path() / out).string() + quiet + mix);
    ASSERT_NE(run.output.find("seq_len choices 128 (25%), 256 (75%)"), std::string::npos) << run.output;
    ASSERT_NE(run.output.find("(mean over the steady steps: lengths vary)"), std::string::npos) << run.output;
  }
  const std::string csv = read_file(dir.path() / "a" / "iterations.csv");
  EXPECT_EQ(csv, read_file(dir.path() / "b" / "iterations.csv"));
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_TRUE(line.ends_with(",peak_reserved_bytes,seq_len")) << line;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    const std::string length = line.substr(line.rfind(',') + 1);
    EXPECT_TRUE(length == "128" || length == "256") << line;
  }
  EXPECT_EQ(rows, 12);
  const auto summary = nlohmann::json::parse(read_file(dir.path() / "a" / "summary.json"));
  EXPECT_EQ(summary["run"]["steady_is_mean_over_lengths"], true);
  EXPECT_EQ(summary["run"]["seq_len"], 256);
  EXPECT_EQ(summary["scenario"]["training"]["seq_len_distribution"]["choices"], nlohmann::json::array({128, 256}));

  // A fixed length, and a packed one, read as before: no column, no flag.
  for (const std::string seq_len : {"256", "'{packed: 256}'"}) {
    const auto out = dir.path() / "fixed";
    const auto run = run_cli("run " + tiny + " -o " + out.string() + quiet + " --set training.seq_len=" + seq_len);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::ifstream in(out / "iterations.csv");
    std::getline(in, line);
    EXPECT_TRUE(line.ends_with(",peak_reserved_bytes")) << line;
    const auto fixed = nlohmann::json::parse(read_file(out / "summary.json"));
    EXPECT_FALSE(fixed["run"].contains("steady_is_mean_over_lengths"));
  }
}

// describe names the distribution; the real backend refuses lengths that vary.
TEST(VariableSeqLen, DescribeShowsTheDistributionAndTheRealBackendRefusesIt) {
  const auto result = run_cli("describe " + kScenario.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("seq_len 4096 (the longest of choices 512 (50%), 4096 (50%); FLOPs at it)"),
            std::string::npos)
      << result.output.substr(0, 400);
  TempDir dir("variable-seq-len-validate");
  const auto validate = run_cli("validate " + kScenario.string() + " --backend host -o " + dir.path().string());
  EXPECT_EQ(validate.exit_code, 2) << validate.output;
  EXPECT_NE(validate.output.find("training.seq_len"), std::string::npos) << validate.output;
}

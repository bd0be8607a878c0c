// `prefetchlab describe` through the real binary: the printed total of every bundled model is
// its published parameter count, and the tree is printed in execution order.
#include <gtest/gtest.h>

#include <regex>

#include "tests/support/cli_runner.hpp"
#include "tests/core/model/published_counts.hpp"

using prefetchlab::testing::run_cli;

namespace {

std::int64_t printed_total(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("total parameters: ([0-9,]+)"))) return -1;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  return std::stoll(digits);
}

}  // namespace

TEST(Describe, PrintsThePublishedTotalForEveryBundledModel) {
  for (const auto& [name, total] : prefetchlab::testing::kPublishedTotals) {
    const auto result = run_cli("describe " + name);
    ASSERT_EQ(result.exit_code, 0) << name << ": " << result.output;
    EXPECT_EQ(printed_total(result.output), total) << name;
  }
}

TEST(Describe, PrintsThePublishedTotalForEveryBundledHfConfig) {
  for (const auto& [name, total] : prefetchlab::testing::kPublishedHfTotals) {
    const auto result =
        run_cli("describe " + std::string(PREFETCHLAB_SOURCE_DIR) + "/models/hf/" + name + ".json --seq-len 512");
    ASSERT_EQ(result.exit_code, 0) << name << ": " << result.output;
    EXPECT_EQ(printed_total(result.output), total) << name;
  }
  // A folder holding a config.json is the same model; an unknown model_type is bad input.
  const auto missing = run_cli("describe " + std::string(PREFETCHLAB_SOURCE_DIR) + "/models");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("config.json"), std::string::npos) << missing.output;
}

TEST(Describe, ScenarioUsesItsPersistenceThresholdAndShape) {
  const auto result = run_cli("describe " + std::string(PREFETCHLAB_SOURCE_DIR) +
                              "/scenarios/default.yaml --set zero.stage3_param_persistence_threshold=0");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("micro_batch 1, seq_len 4096"), std::string::npos);
  // Threshold 0: even the RMSNorm weights are no longer persistent.
  EXPECT_NE(result.output.find("persistent parameters: 0\n"), std::string::npos) << result.output;
  const auto defaults = run_cli("describe " + std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/default.yaml");
  // 65 RMSNorm weights of 4,096 elements (2 per layer x 32 + final norm) are persistent at 1e5.
  EXPECT_NE(defaults.output.find("persistent parameters: 266,240\n"), std::string::npos) << defaults.output;
}

TEST(Describe, TreeIsInExecutionOrderWithIndentation) {
  const auto result = run_cli("describe gpt2-small --seq-len 128 --micro-batch 2");
  ASSERT_EQ(result.exit_code, 0);
  const auto ln1 = result.output.find("\n      ln_1 ");
  const auto attn = result.output.find("\n      attn ");
  const auto c_attn = result.output.find("\n        c_attn ");
  const auto ln2 = result.output.find("\n      ln_2 ");
  ASSERT_NE(ln1, std::string::npos) << result.output;
  EXPECT_LT(ln1, attn);
  EXPECT_LT(attn, c_attn);
  EXPECT_LT(c_attn, ln2);
  EXPECT_NE(result.output.find("micro_batch 2, seq_len 128"), std::string::npos);
}

TEST(Describe, UnknownNameSuggestsTheClosestModel) {
  const auto result = run_cli("describe llama-2-7");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("did you mean 'llama-2-7b'"), std::string::npos) << result.output;
  EXPECT_EQ(run_cli("describe gpt2-small --seq-len 5000").exit_code, 2);
}

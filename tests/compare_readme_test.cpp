// README's `compare` table is the command's own output: regenerate it and diff (issue
// "Controller core", done-when 4), and check the claims the README makes about it.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cli_runner.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

TEST(CompareReadme, TableMatchesTheCommandAndPaceSearchSettlesWithin5Iterations) {
  const std::string root = PREFETCHLAB_SOURCE_DIR;
  TempDir dir("compare");
  const auto result = run_cli("compare " + root + "/scenarios/bert-base-qa-2x-rtx4000ada.yaml " + root +
                              "/scenarios/tiny-llama-2x-h100.yaml " + root + "/scenarios/gpt2-medium-4-nodes.yaml " +
                              root + "/scenarios/default.yaml -o " + (dir.path() / "table.md").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string table = read_file(dir.path() / "table.md");
  const std::string readme = read_file(root + "/README.md");
  const auto begin = readme.find("<!-- compare:begin -->\n");
  const auto end = readme.find("<!-- compare:end -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string in_readme = readme.substr(begin + 23, end - begin - 23);
  EXPECT_EQ(in_readme, table) << "README's compare table is stale; regenerate it with the command above it";

  // Our policy: within 2% of the best static, from iteration 6 at the latest (5 after the trace
  // completes), on every scenario.
  std::istringstream rows(table);
  std::string row;
  int checked = 0;
  while (std::getline(rows, row)) {
    if (row.find("| pace_search |") == std::string::npos) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(row, m, std::regex(R"(\| ([+-][0-9.]+)% \| ([0-9]+|never) \|)"))) << row;
    EXPECT_LE(std::stod(m[1]), 2.0) << row;
    ASSERT_NE(m[2], "never") << row;
    EXPECT_LE(std::stoi(m[2]), 6) << row;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// README is one screen (quick start, tour, command table, links) and each fact lives on one docs
// page: the exit codes' list is in docs/commands.md only.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = PREFETCHLAB_SOURCE_DIR;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Readme, FitsOneScreen) {
  const std::vector<std::string> lines = lines_of(read_file(kRoot / "README.md"));
  EXPECT_LE(lines.size(), 150u) << "README.md: move detail to a docs/ page and link it";
}

TEST(Readme, QuickStartHasExactlyTwoCommands) {
  const std::vector<std::string> lines = lines_of(read_file(kRoot / "README.md"));
  std::size_t at = 0;
  while (at < lines.size() && lines[at] != "## Quick start") ++at;
  ASSERT_LT(at, lines.size()) << "README.md has no '## Quick start'";
  while (at < lines.size() && lines[at] != "```sh") ++at;
  ASSERT_LT(at, lines.size()) << "README.md's quick start has no sh block";
  std::vector<std::string> commands;
  for (++at; at < lines.size() && lines[at] != "```"; ++at) {
    if (!lines[at].empty()) commands.push_back(lines[at]);
  }
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].rfind("./setup.sh", 0), 0u) << commands[0];
  EXPECT_EQ(commands[1], "./setup.sh test");
  // .ci/run runs README's test command.
  EXPECT_NE(read_file(kRoot / ".ci" / "run").find(commands[1]), std::string::npos);
}

// A page that lists the codes names most of them in one place: "3 collective mismatch" and
// "4 out of memory" together is the list.
TEST(Readme, ExitCodesAreListedOnOnePage) {
  std::vector<fs::path> pages{kRoot / "README.md"};
  for (const auto& entry : fs::directory_iterator(kRoot / "docs")) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  std::vector<std::string> listing;
  for (const fs::path& page : pages) {
    const std::string text = read_file(page);
    const bool table = text.find("| 3 | collective mismatch") != std::string::npos &&
                       text.find("| 4 | out of memory") != std::string::npos;
    const bool prose = text.find("3 collective mismatch") != std::string::npos &&
                       text.find("4 out of memory") != std::string::npos;
    if (table || prose) listing.push_back(fs::relative(page, kRoot).string());
  }
  EXPECT_EQ(listing, std::vector<std::string>{"docs/commands.md"});
}

// Every `prefetchlab run SCENARIO ...` the README and docs show on a bundled scenario, as a user
// would paste it, succeeds (exit 0): a command that only works with --no-expect says so
// (issue 45: two README commands exited 5). Only the output folder is moved into a temporary one.
TEST(Readme, EveryRunCommandShownSucceeds) {
  std::vector<fs::path> pages{kRoot / "README.md"};
  for (const auto& entry : fs::directory_iterator(kRoot / "docs")) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  std::sort(pages.begin(), pages.end());
  const fs::path out = fs::temp_directory_path() / ("prefetchlab-readme-" + std::to_string(::getpid()));
  int checked = 0;
  for (const fs::path& page : pages) {
    const std::string text = read_file(page);
    // Inline (`prefetchlab run ...`) and on their own line in a code block ("$ " prompt or none).
    std::vector<std::string> commands;
    for (std::size_t at = text.find("`prefetchlab run "); at != std::string::npos;
         at = text.find("`prefetchlab run ", at + 1)) {
      const std::size_t end = text.find('`', at + 1);
      if (end == std::string::npos) break;
      commands.push_back(text.substr(at + 1, end - at - 1));
    }
    for (std::string line : lines_of(text)) {
      line.erase(0, line.find_first_not_of(' '));
      for (const char* prefix : {"$ ", "./", "build/apps/"}) {
        if (line.rfind(prefix, 0) == 0) line = line.substr(std::string(prefix).size());
      }
      if (line.rfind("prefetchlab run ", 0) == 0 && line.back() != '\\') commands.push_back(line);
    }
    for (const std::string& command : commands) {
      std::istringstream words(command);
      std::vector<std::string> argv;
      for (std::string w; words >> w;) argv.push_back(w);
      // Concrete commands only: a bundled scenario file, no placeholder (SCENARIO, DIR, k=v).
      if (argv.size() < 3 || argv[2].rfind("scenarios/", 0) != 0 || !fs::exists(kRoot / argv[2])) continue;
      bool placeholder = false;
      std::string args = "run " + (kRoot / argv[2]).string();
      for (std::size_t i = 3; i < argv.size(); ++i) {
        if (argv[i].find_first_of("<>[]") != std::string::npos || argv[i] == "..." ||
            (argv[i] != "-o" && argv[i].find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == std::string::npos)) {
          placeholder = true;
        }
        if (argv[i] == "-o" && i + 1 < argv.size()) {
          ++i;  // the folder a user would write to becomes a temporary one
          continue;
        }
        if (argv[i] == "--kineto-trace" && i + 1 < argv.size()) {
          args += " --kineto-trace " + (out / "kineto").string();
          ++i;
          continue;
        }
        args += " " + argv[i];
      }
      if (placeholder) continue;
      fs::remove_all(out);
      const auto result = prefetchlab::testing::run_cli(args + " -o " + out.string());
      EXPECT_EQ(result.exit_code, 0) << fs::relative(page, kRoot).string() << ": `prefetchlab run " << argv[2]
                                     << "...`\n" << result.output.substr(0, 2000);
      ++checked;
    }
  }
  fs::remove_all(out);
  EXPECT_GE(checked, 1);
  std::printf("checked %d run command(s) shown in README.md and docs/\n", checked);
}

}  // namespace

// README is one screen (quick start, tour, command table, links) and each fact lives on one docs
// page: the exit codes' list is in docs/commands.md only.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace

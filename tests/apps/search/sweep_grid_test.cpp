// The pieces of a sweep without the binary: grid expansion order (product, zip), error
// relocation to grid lines, shard specs, reading back row files with a torn tail, appending.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/cli_runner.hpp"
#include "core/io/csv_reader.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/input/input_error.hpp"
#include "apps/search/shard_spec.hpp"
#include "apps/search/sweep_grid.hpp"
#include "tests/support/input_error_testing.hpp"

namespace {

using namespace prefetchlab;
using prefetchlab::testing::TempDir;

std::vector<std::string> texts(const core::SweepGrid& grid, std::size_t point) {
  std::vector<std::string> out;
  for (const auto* value : grid.values_at(point)) out.push_back(value->text);
  return out;
}

TEST(SweepGrid, ProductInFileOrderWithTheZipBlockAsOneAxis) {
  TempDir dir("grid");
  const auto file = dir.write("grid.yaml",
                              "a.x: [1e6, 5e6]\n"
                              "zip:\n"
                              "  b.y: [1, 2, 3]\n"
                              "  b.z: [p, q, r]\n"
                              "c: [true, false]\n");
  const auto grid = core::SweepGrid::load(file);
  ASSERT_EQ(grid.point_count(), 12u);
  ASSERT_EQ(grid.keys().size(), 4u);
  EXPECT_EQ(grid.keys()[2].dotted, "b.z");
  EXPECT_EQ(grid.keys()[2].line, 4);
  EXPECT_EQ(texts(grid, 0), (std::vector<std::string>{"1e6", "1", "p", "true"}));
  EXPECT_EQ(texts(grid, 1), (std::vector<std::string>{"1e6", "1", "p", "false"}));
  EXPECT_EQ(texts(grid, 2), (std::vector<std::string>{"1e6", "2", "q", "true"}));
  EXPECT_EQ(texts(grid, 6), (std::vector<std::string>{"5e6", "1", "p", "true"}));
  EXPECT_EQ(texts(grid, 11), (std::vector<std::string>{"5e6", "3", "r", "false"}));
  EXPECT_EQ(grid.overrides_at(11), (std::vector<std::string>{"a.x=5e6", "b.y=3", "b.z=r", "c=false"}));
}

TEST(SweepGrid, ValuesKeepTheirSpellingAndListsBecomeFlowYaml) {
  TempDir dir("grid-values");
  const auto file = dir.write("grid.yaml", "k: [5e7, 50000000, '1e6', [1, 2], {a: 1}]\n");
  const auto grid = core::SweepGrid::load(file);
  EXPECT_EQ(texts(grid, 0)[0], "5e7");
  EXPECT_EQ(texts(grid, 1)[0], "50000000");
  EXPECT_EQ(texts(grid, 2)[0], "1e6");
  EXPECT_EQ(texts(grid, 3)[0], "[1, 2]");
  EXPECT_EQ(texts(grid, 4)[0], "{a: 1}");
}

TEST(SweepGrid, IdentityIgnoresLayoutAndCommentsButNotValues) {
  TempDir dir("grid-identity");
  const auto a = core::SweepGrid::load(dir.write("a.yaml", "k: [1, 2]\nzip: {m: [3], n: [4]}\n"));
  const auto b = core::SweepGrid::load(dir.write("b.yaml", "# same\nk:\n  - 1\n  - 2\nzip:\n  m: [3]\n  n: [4]\n"));
  const auto c = core::SweepGrid::load(dir.write("c.yaml", "k: [1, 3]\nzip: {m: [3], n: [4]}\n"));
  EXPECT_EQ(a.identity(), b.identity());
  EXPECT_NE(a.identity(), c.identity());
}

TEST(SweepGrid, ScenarioErrorsAtAnOverrideMoveToTheGridLine) {
  TempDir dir("grid-relocate");
  const auto grid = core::SweepGrid::load(dir.write("grid.yaml", "a: [1]\nb.c:\n  - 2\n  - x\n"));
  const core::InputError value_error({"--set b.c", 0}, "b.c", "is 'x'", "a number");
  const auto moved = grid.relocate(value_error, 1);
  EXPECT_EQ(moved.where().file, grid.file());
  EXPECT_EQ(moved.where().line, 4);
  EXPECT_EQ(moved.key(), "b.c");
  EXPECT_NE(std::string(moved.what()).find("is 'x' (grid point 1)"), std::string::npos) << moved.what();

  const core::InputError unknown({"--set b.c", 0}, "b.c", "is not a known key", "one of ...", "d");
  EXPECT_EQ(grid.relocate(unknown, 0).where().line, 2);

  // Elsewhere (a file the scenario names): the place stays, the point's values are added.
  const core::InputError elsewhere({"scenario.yaml", 7}, "x", "is too large", "less");
  const auto kept = grid.relocate(elsewhere, 1);
  EXPECT_EQ(kept.where().file, "scenario.yaml");
  EXPECT_NE(std::string(kept.what()).find("a=1, b.c=x"), std::string::npos) << kept.what();
}

TEST(ShardSpec, ParsesIOfNAndPicksPointsModN) {
  const auto shard = core::parse_shard_spec("2/5");
  EXPECT_EQ(shard.index, 2u);
  EXPECT_EQ(shard.count, 5u);
  EXPECT_TRUE(shard.contains(7));
  EXPECT_FALSE(shard.contains(8));
  EXPECT_EQ(shard.text(), "2/5");
  for (const char* bad : {"", "1", "/", "1/", "/2", "2/2", "0/0", "1/2/3", "x/2", " 0/2", "-0/2"}) {
    const auto error = prefetchlab::testing::expect_input_error([&] { core::parse_shard_spec(bad); });
    EXPECT_EQ(error.where().file, std::string("--shard ") + bad);
  }
}

TEST(CsvReader, ReturnsCompleteRecordsAndReportsATornTail) {
  const auto whole = core::parse_csv("a,b\n1,\"x,\"\"y\"\"\"\n2,\"line\nbreak\"\n");
  ASSERT_EQ(whole.records.size(), 3u);
  EXPECT_FALSE(whole.torn_tail);
  EXPECT_EQ(whole.records[1].fields, (std::vector<std::string>{"1", "x,\"y\""}));
  EXPECT_EQ(whole.records[2].fields[1], "line\nbreak");
  EXPECT_EQ(whole.records[2].text, "2,\"line\nbreak\"\n");
  EXPECT_EQ(whole.records[2].line, 3);

  const std::string head = "a,b\n1,2\n";
  for (const std::string tail : {"3", "3,4", "3,\"open\n", "3,\"open"}) {
    const auto torn = core::parse_csv(head + tail);
    EXPECT_TRUE(torn.torn_tail) << tail;
    EXPECT_EQ(torn.records.size(), 2u) << tail;
    EXPECT_EQ(torn.complete_bytes, head.size()) << tail;
  }
}

TEST(CsvRowWriter, AppendToKeepsRowsAndWritesTheHeaderOnlyOnce) {
  TempDir dir("append");
  const auto path = dir.path() / "rows.csv";
  {
    auto writer = core::CsvRowWriter::append_to(path, {"a", "b"});
    writer.append({1, "x"});
  }
  {
    auto writer = core::CsvRowWriter::append_to(path, {"a", "b"});
    writer.append({2, "y"});
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "a,b\n1,x\n2,y\n");
}

}  // namespace

// Size parsing, "did you mean", and the strict YAML section reader every loader uses.
#include <gtest/gtest.h>

#include "tests/support/input_error_testing.hpp"

#include "core/input/closest_match.hpp"
#include "core/input/size_value.hpp"
#include "core/input/yaml_section.hpp"

using prefetchlab::testing::expect_input_error;
namespace pc = prefetchlab::core;

TEST(SizeValue, CountsAcceptScientificAndPlainForms) {
  EXPECT_EQ(pc::parse_count("5e7"), 50'000'000);
  EXPECT_EQ(pc::parse_count("50000000"), 50'000'000);
  EXPECT_EQ(pc::parse_count("1.5e9"), 1'500'000'000);
  EXPECT_EQ(pc::parse_count("0"), 0);
  EXPECT_EQ(pc::parse_count("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(pc::parse_count("1.5"));
  EXPECT_FALSE(pc::parse_count("-3"));
  EXPECT_FALSE(pc::parse_count("5e7x"));
  EXPECT_FALSE(pc::parse_count(""));
  EXPECT_FALSE(pc::parse_count("1e30"));
}

TEST(SizeValue, BytesAcceptBinaryAndDecimalUnits) {
  EXPECT_EQ(pc::parse_bytes("70GiB"), 70LL << 30);
  EXPECT_EQ(pc::parse_bytes("80GB"), 80'000'000'000LL);
  EXPECT_EQ(pc::parse_bytes("512MiB"), 512LL << 20);
  EXPECT_EQ(pc::parse_bytes("1.5KiB"), 1536);
  EXPECT_EQ(pc::parse_bytes("8e10"), 80'000'000'000LL);
  EXPECT_EQ(pc::parse_bytes("100B"), 100);
  EXPECT_FALSE(pc::parse_bytes("70 gigs"));
  EXPECT_FALSE(pc::parse_bytes("GiB"));
}

TEST(ClosestMatch, SuggestsNearKeysOnly) {
  const std::vector<std::string> keys{"micro_batch", "seq_len", "iterations"};
  EXPECT_EQ(pc::closest_match("seq_lne", keys), "seq_len");
  EXPECT_EQ(pc::closest_match("micro_bacth", keys), "micro_batch");
  EXPECT_EQ(pc::closest_match("completely_different", keys), "");
  EXPECT_EQ(pc::edit_distance("kitten", "sitting"), 3u);
}

namespace {
pc::YamlSection parse(const std::string& text) { return prefetchlab::testing::parse_yaml(text, "test.yaml"); }

}  // namespace

TEST(YamlSection, ReadsTypedValuesAndDefaults) {
  auto root = parse("a: 5e7\nb: true\nc: 0.5\nd: hello\ne: 70GiB\nsub:\n  x: 3\n");
  EXPECT_EQ(root.require_count("a"), 50'000'000);
  EXPECT_TRUE(root.require_bool("b"));
  EXPECT_DOUBLE_EQ(root.require_double("c", 0, 1), 0.5);
  EXPECT_EQ(root.require_string("d"), "hello");
  EXPECT_EQ(root.require_bytes("e"), 70LL << 30);
  EXPECT_EQ(root.get_int("missing", 7, 0, 10), 7);
  auto sub = root.section("sub");
  EXPECT_EQ(sub.require_int("x", 0, 5), 3);
  sub.finish();
  root.finish();
}

TEST(YamlSection, UnknownKeyNamesLineAndClosestKey) {
  auto root = parse("alpha: 1\nbetta: 2\n");
  root.get_int("alpha", 0, 0, 9);
  root.get_int("beta", 0, 0, 9);
  const auto e = expect_input_error([&] { root.finish(); });
  EXPECT_EQ(e.where().file, "test.yaml");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.key(), "betta");
  EXPECT_EQ(e.suggestion(), "beta");
}

TEST(YamlSection, WrongTypeAndRangeErrorsNameTheKey) {
  auto root = parse("top:\n  n: -4\n  flag: maybe\n  list: [1, 2]\n");
  auto top = root.section("top");
  auto e = expect_input_error([&] { top.require_int("n", 0, 100); });
  EXPECT_EQ(e.key(), "top.n");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_NE(std::string(e.what()).find("[0, 100]"), std::string::npos) << e.what();
  e = expect_input_error([&] { top.require_bool("flag"); });
  EXPECT_EQ(e.where().line, 3);
  e = expect_input_error([&] { top.require_count("list"); });
  EXPECT_NE(std::string(e.what()).find("a list"), std::string::npos) << e.what();
}

TEST(YamlSection, DuplicateKeysAreErrors) {
  const auto e = expect_input_error([] { parse("a: 1\nb: 2\na: 3\n"); });
  EXPECT_EQ(e.key(), "a");
  EXPECT_EQ(e.where().line, 3);
}

enum class Color { kRed, kGreen };
TEST(YamlSection, EnumsSuggestTheClosestName) {
  auto root = parse("color: gren\n");
  const auto e = expect_input_error(
      [&] { root.require_enum<Color>("color", {{"red", Color::kRed}, {"green", Color::kGreen}}); });
  EXPECT_EQ(e.suggestion(), "green");
  EXPECT_EQ(e.expected(), "one of red | green");
}

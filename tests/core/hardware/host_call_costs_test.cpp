// The CSV of bench/host_costs/torch_call_host_costs.py read back: its columns in any order among
// others, and every malformed row refused with the line and column that is wrong.
#include <gtest/gtest.h>

#include <string>

#include "core/hardware/host_call_costs.hpp"
#include "core/input/input_error.hpp"

namespace pc = prefetchlab::core;

namespace {

// The InputError `text` raises: line and key (fails the test when it parses).
std::pair<int, std::string> refusal(const std::string& text) {
  try {
    pc::parse_host_call_costs(text, "costs.csv");
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.where().file, "costs.csv");
    return {e.where().line, e.key()};
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return {-1, ""};
}

}  // namespace

TEST(HostCallCosts, ReadsTheScriptsColumnsInAnyOrder) {
  const auto rows = pc::parse_host_call_costs(
      "way,gpu,us_per_call,call,bytes_per_rank\n"
      "issue,H100,41.25,all_reduce,4096\n"
      "\n"
      "profiled,\"H100, SXM\",63.5,all_gather,1048576\n",
      "costs.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].call, "all_reduce");
  EXPECT_EQ(rows[0].way, "issue");
  EXPECT_EQ(rows[0].bytes_per_rank, 4096);
  EXPECT_DOUBLE_EQ(rows[0].us_per_call, 41.25);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[1].call, "all_gather");
  EXPECT_EQ(rows[1].bytes_per_rank, 1048576);
  EXPECT_DOUBLE_EQ(rows[1].us_per_call, 63.5);
  EXPECT_EQ(rows[1].line, 4);
}

TEST(HostCallCosts, ALastRowWithoutItsLineEndIsComplete) {
  const auto rows = pc::parse_host_call_costs("call,bytes_per_rank,way,us_per_call\nall_reduce,4096,issue,40", "costs.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].us_per_call, 40.0);
}

TEST(HostCallCosts, WindowsLineEndsReadAsUnix) {
  const auto rows =
      pc::parse_host_call_costs("call,bytes_per_rank,way,us_per_call\r\nall_reduce,4096,issue,40\r\n", "costs.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].us_per_call, 40.0);
}

TEST(HostCallCosts, RefusesMalformedRowsNamingLineAndColumn) {
  const std::string header = "call,bytes_per_rank,way,us_per_call\n";
  EXPECT_EQ(refusal(""), (std::pair<int, std::string>{0, ""}));
  EXPECT_EQ(refusal("call,bytes_per_rank,way\nall_reduce,4096,issue\n"), (std::pair<int, std::string>{1, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,fast\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,0\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,-3\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,inf\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,2e7\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  // Faster than any call can be (4.9e-324 once gave host_speed inf).
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,4.9e-324\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,0.05\n"), (std::pair<int, std::string>{2, "us_per_call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4 KiB,issue,40\n"), (std::pair<int, std::string>{2, "bytes_per_rank"}));
  EXPECT_EQ(refusal(header + "all_reduce,-1,issue,40\n"), (std::pair<int, std::string>{2, "bytes_per_rank"}));
  EXPECT_EQ(refusal(header + "all_reduce,18446744073709551615,issue,40\n"),
            (std::pair<int, std::string>{2, "bytes_per_rank"}));
  EXPECT_EQ(refusal(header + ",4096,issue,40\n"), (std::pair<int, std::string>{2, "call"}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,40\nall_gather,4096,issue\n"), (std::pair<int, std::string>{3, ""}));
  EXPECT_EQ(refusal(header + "all_reduce,4096,issue,40\n\"all_gather,4096"), (std::pair<int, std::string>{3, ""}));
}

TEST(HostCallCosts, AMissingFileIsBadInputNamingIt) {
  try {
    pc::read_host_call_costs("/nonexistent/costs.csv");
    FAIL() << "read a missing file";
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.where().file, "/nonexistent/costs.csv");
    EXPECT_NE(std::string(e.what()).find("cannot read"), std::string::npos) << e.what();
  }
}

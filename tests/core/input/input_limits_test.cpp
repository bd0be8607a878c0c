// Sizes read from outside files are bounded (core/input/input_limits.hpp): a number out of
// proportion to the rest of the input is an InputError naming the file, the line and the key,
// never a wrap-around, a division by zero or memory that follows the number.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>

#include <yaml-cpp/yaml.h>

#include "core/control/samples_reader.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "core/input/input_limits.hpp"
#include "core/input/yaml_overrides.hpp"
#include "core/memory/allocator_sequence.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/input_error_testing.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::expect_input_error;
using prefetchlab::testing::TempDir;

TEST(InputLimits, NcclTestsRankAndThreadCountsAreBounded) {
  const auto rank = expect_input_error([] {
    pc::parse_nccl_tests_log("# all_gather_perf\n#  Rank 4194304 Group  0 Pid 7 on n0 device 0\n", "big-rank.log");
  });
  EXPECT_EQ(rank.where().file, "big-rank.log");
  EXPECT_EQ(rank.where().line, 2);
  EXPECT_EQ(rank.key(), "Rank");
  const auto threads = expect_input_error(
      [] { pc::parse_nccl_tests_log("# nThread 65536 nGpus 65536 minBytes 8\n", "threads.log"); });
  EXPECT_EQ(threads.where().line, 1);
  EXPECT_EQ(threads.key(), "nThread");
  // nThread 0 would make every size-derived rank count a division by zero downstream.
  expect_input_error([] { pc::parse_nccl_tests_log("# nThread 0 nGpus 8\n", "zero.log"); });
  // The largest accepted product still parses.
  const auto ok = pc::parse_nccl_tests_log("# nThread 1 nGpus 1048576\n", "ok.log");
  EXPECT_TRUE(ok.rows.empty());
}

TEST(InputLimits, NcclTestsCountAboveItsSizeIsAnErrorNotADivisionByZero) {
  // count * sizeof(double) wraps to 0 in 64 bits: once a SIGFPE in the rank inference.
  const auto e = expect_input_error([] {
    pc::parse_nccl_tests_log("all_gather_perf\n  2048 2305843009213693952 double none -1 1.0 1.0 1.0 0 1.0 1.0 1.0 0\n",
                             "wrap.log");
  });
  EXPECT_EQ(e.where().line, 2);
  const auto huge = expect_input_error([] {
    pc::parse_nccl_tests_log("all_gather_perf\n  4611686018427387904 8 float none -1 1.0 1.0 1.0 0 1.0 1.0 1.0 0\n",
                             "huge.log");
  });
  EXPECT_EQ(huge.where().line, 2);
}

TEST(InputLimits, AllocatorSequenceSizeAbovePetabyteIsAnError) {
  TempDir dir("limits");
  const auto file = dir.write("seq.csv", "op,id,bytes\nmalloc,a,1024\nmalloc,b,1125899906842625\n");
  const auto e = expect_input_error([&] { pc::load_allocator_sequence(file); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "bytes");
  // Exactly 1 PiB is accepted by the reader (the replay then reports an out-of-memory step).
  const auto at_limit = dir.write("ok.csv", "op,id,bytes\nmalloc,a,1125899906842624\n");
  EXPECT_EQ(pc::load_allocator_sequence(at_limit).size(), 1u);
}

TEST(InputLimits, SamplesIterationIsBoundedSoReplayMemoryFollowsTheFile) {
  TempDir dir("limits");
  const auto file = dir.write("samples.csv",
                              "iteration,rank,phase,wait_ns,interval_ns\n1,0,forward,0,10\n1000001,0,forward,0,10\n");
  const auto e = expect_input_error([&] { pc::read_samples_csv(file, 2); });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.key(), "iteration");
  // Below the absolute limit, an iteration is still bounded by the file's rows: a run writes at
  // least one sample per iteration, so iteration 4 of a 3-row file is a damaged file.
  const auto beyond_rows = dir.write(
      "rows.csv", "iteration,rank,phase,wait_ns,interval_ns\n1,0,forward,0,10\n4,1,forward,0,10\n1,0,forward,0,10\n");
  const auto rows = expect_input_error([&] { pc::read_samples_csv(beyond_rows, 2); });
  EXPECT_EQ(rows.where().line, 3);
  EXPECT_EQ(rows.key(), "iteration");
  EXPECT_NE(rows.problem().find("iteration 4 in a file of 3 sample rows"), std::string::npos) << rows.problem();
  const auto ok = dir.write("ok.csv", "iteration,rank,phase,wait_ns,interval_ns\n1,0,forward,0,10\n2,1,forward,0,10\n");
  EXPECT_EQ(pc::read_samples_csv(ok, 2).samples.size(), 2u);
}

TEST(InputLimits, SetOnADocumentWhoseRootIsNotAMappingNamesTheFile) {
  for (const std::string text : {"hello", "- a\n- b\n", "42"}) {
    YAML::Node root = YAML::Load(text);
    pc::YamlSource source;
    source.file = "scalar.yaml";
    const auto e = expect_input_error([&] { pc::apply_override(root, "training.seq_len=1", source); });
    EXPECT_EQ(e.where().file, "scalar.yaml") << text;
    EXPECT_EQ(e.key(), "training.seq_len") << text;
  }
}

// A mapping of many keys is checked for duplicates by hash (issue 46, R1: the check was a
// scan per key, so a 300k-key file ran past two minutes): the duplicate after 200,000 distinct
// keys is named with both lines.
TEST(InputLimits, DuplicateKeysAmongManyAreFoundByName) {
  std::string text;
  const int keys = 200'000;
  for (int i = 0; i < keys; ++i) text += "k" + std::to_string(i) + ": 1\n";
  text += "k7: 2\n";
  const auto e = expect_input_error([&] { prefetchlab::testing::parse_yaml(text, "many.yaml"); });
  EXPECT_EQ(e.where().file, "many.yaml");
  EXPECT_EQ(e.where().line, keys + 1);
  EXPECT_EQ(e.key(), "k7");
  EXPECT_NE(e.problem().find("first on line 8"), std::string::npos) << e.problem();
}

// An error about a value quotes at most 64 characters of it, control characters as '?' (issue
// 46, S5: `model: /etc/passwd` printed the whole file).
TEST(InputLimits, ErrorsQuoteAValueShortly) {
  EXPECT_EQ(pc::quoted_input("abc"), "'abc'");
  EXPECT_EQ(pc::quoted_input("a\nb\x1b"), "'a?b?'");
  const std::string secret = "root:x:0:0:" + std::string(5000, 'z');
  const std::string shown = pc::quoted_input(secret);
  EXPECT_EQ(shown, "'" + secret.substr(0, pc::kQuotedChars) + "'... (5011 characters)");

  TempDir dir("quoted");
  const auto file = dir.path() / "not-a-model.yaml";
  std::ofstream(file) << secret << "\n";
  const auto e = expect_input_error([&] { pc::YamlSection::load_file(file.string()); });
  EXPECT_LT(std::string(e.what()).size(), 400u) << e.what();
  EXPECT_EQ(std::string(e.what()).find(std::string(100, 'z')), std::string::npos);
}

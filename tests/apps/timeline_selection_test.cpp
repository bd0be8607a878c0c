// output.trace_ranks, output.trace_iterations and output.timeline_budget through `prefetchlab run`:
// the trace, samples.csv and memory.csv keep only what was chosen, whole iterations under a
// budget, the defaults above 64 ranks limit them and say so, and nothing simulated changes
// (iterations.csv, buckets.csv and summary.json's figures stay the unlimited run's).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "core/io/csv_reader.hpp"
#include "tests/support/cli_runner.hpp"

namespace {

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

const std::string kTinyLlama = (fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios" / "tiny-llama-2x-h100.yaml").string();

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Values of `column` (by header name) over a CSV's rows.
std::multiset<std::string> column(const fs::path& path, const std::string& name) {
  const auto csv = prefetchlab::core::parse_csv(read_file(path));
  std::multiset<std::string> out;
  if (csv.records.empty()) return out;
  const auto& header = csv.records.front().fields;
  const auto at = static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  if (at == header.size()) return out;
  for (std::size_t r = 1; r < csv.records.size(); ++r) out.insert(csv.records[r].fields.at(at));
  return out;
}

struct TraceCounts {
  std::map<int, std::size_t> spans_per_rank;
  std::map<int, std::size_t> spans_per_iteration;
  std::set<int> named_ranks;  // process_name metadata
};

TraceCounts trace_counts(const fs::path& path) {
  TraceCounts counts;
  const auto trace = nlohmann::json::parse(read_file(path));
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "process_name") counts.named_ranks.insert(event["pid"].get<int>());
    if (event["ph"] != "X") continue;
    ++counts.spans_per_rank[event["pid"].get<int>()];
    ++counts.spans_per_iteration[event["args"]["iteration"].get<int>()];
  }
  return counts;
}

// The run of the tiny scenario into `dir` with `sets` (each "key=value"), every rank simulated:
// what each rank's timeline keeps is the subject here (a collapsed run has one rank's,
// tests/sim/rank_symmetry_test.cpp).
prefetchlab::testing::CliResult run_tiny(const fs::path& dir, const std::vector<std::string>& sets,
                                         const std::string& scenario = kTinyLlama) {
  std::string args = "run " + scenario + " -o " + dir.string() + " --no-expect --every-rank";
  for (const auto& set : sets) args += " --set " + set;
  return run_cli(args);
}

nlohmann::json figures(const fs::path& dir) {
  auto summary = nlohmann::json::parse(read_file(dir / "summary.json"));
  summary.erase("scenario");  // holds the output keys themselves
  summary.erase("timelines_left_out");
  return summary;
}

class TimelineSelection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    full_ = new TempDir("timeline-full");
    const auto result = run_tiny(full_->path(), {});
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  static void TearDownTestSuite() { delete full_; }
  // What the simulation produced is the same whatever the outputs keep.
  static void expect_same_simulation(const fs::path& dir) {
    EXPECT_TRUE(read_file(dir / "iterations.csv") == read_file(full_->path() / "iterations.csv"));
    EXPECT_TRUE(read_file(dir / "buckets.csv") == read_file(full_->path() / "buckets.csv"));
    EXPECT_EQ(figures(dir), figures(full_->path()));
  }
  static TempDir* full_;
};
TempDir* TimelineSelection::full_ = nullptr;

TEST_F(TimelineSelection, TraceRanksFilterTheTraceSamplesAndMemory) {
  TempDir out("timeline-ranks");
  const auto result = run_tiny(out.path(), {"output.trace_ranks=[1]"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const TraceCounts full = trace_counts(full_->path() / "trace.json");
  const TraceCounts kept = trace_counts(out.path() / "trace.json");
  ASSERT_EQ(full.spans_per_rank.size(), 2u);
  EXPECT_EQ(kept.spans_per_rank, (std::map<int, std::size_t>{{1, full.spans_per_rank.at(1)}}));
  EXPECT_EQ(kept.named_ranks, std::set<int>{1});
  const auto sample_ranks = column(out.path() / "samples.csv", "rank");
  EXPECT_FALSE(sample_ranks.empty());
  EXPECT_EQ(std::set<std::string>(sample_ranks.begin(), sample_ranks.end()), std::set<std::string>{"1"});
  EXPECT_EQ(sample_ranks.size(), column(full_->path() / "samples.csv", "rank").count("1"));
  const auto memory_ranks = column(out.path() / "memory.csv", "rank");
  EXPECT_FALSE(memory_ranks.empty());
  EXPECT_EQ(std::set<std::string>(memory_ranks.begin(), memory_ranks.end()), std::set<std::string>{"1"});
  EXPECT_EQ(memory_ranks.size(), column(full_->path() / "memory.csv", "rank").count("1"));
  expect_same_simulation(out.path());
  // It says what it left out, on stderr and in summary.json.
  EXPECT_NE(result.output.find("note: trace.json: ranks 1 of 2 kept"), std::string::npos) << result.output;
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(summary["timelines_left_out"].size(), 3u) << summary["timelines_left_out"];
  EXPECT_EQ(summary["scenario"]["output"]["trace_ranks"], "[1]");
}

TEST_F(TimelineSelection, TraceIterationsAndFirstRanks) {
  TempDir out("timeline-iterations");
  const auto result = run_tiny(out.path(), {"output.trace_iterations=last:2", "output.trace_ranks=first:1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const TraceCounts kept = trace_counts(out.path() / "trace.json");
  EXPECT_EQ(kept.named_ranks, std::set<int>{0});
  ASSERT_EQ(kept.spans_per_iteration.size(), 2u);
  EXPECT_EQ(kept.spans_per_iteration.begin()->first, 5);
  EXPECT_EQ(kept.spans_per_iteration.rbegin()->first, 6);
  // trace_iterations limits the trace only: memory.csv keeps every iteration of rank 0.
  EXPECT_EQ(column(out.path() / "memory.csv", "rank").size(), column(full_->path() / "memory.csv", "rank").count("0"));
  expect_same_simulation(out.path());
}

// Under a budget the trace keeps whole iterations from the first, and says which it left out.
TEST_F(TimelineSelection, ABudgetKeepsWholeIterationsFromTheFirst) {
  TempDir out("timeline-budget");
  const auto result = run_tiny(out.path(), {"output.timeline_budget=300KB"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const TraceCounts full = trace_counts(full_->path() / "trace.json");
  const TraceCounts kept = trace_counts(out.path() / "trace.json");
  ASSERT_FALSE(kept.spans_per_iteration.empty());
  ASSERT_LT(kept.spans_per_iteration.size(), full.spans_per_iteration.size());
  int expected_iteration = 1;
  for (const auto& [iteration, spans] : kept.spans_per_iteration) {
    EXPECT_EQ(iteration, expected_iteration++);
    EXPECT_EQ(spans, full.spans_per_iteration.at(iteration)) << "iteration " << iteration << " is not whole";
  }
  EXPECT_LT(fs::file_size(out.path() / "trace.json"), 300'000u);
  const std::string note = "note: trace.json: iterations " + std::to_string(expected_iteration) +
                           "-6 left out to stay under 300 kB (output.timeline_budget)";
  EXPECT_NE(result.output.find(note), std::string::npos) << result.output;
  // memory.csv is far smaller than the budget: whole.
  EXPECT_TRUE(read_file(out.path() / "memory.csv") == read_file(full_->path() / "memory.csv"));
  expect_same_simulation(out.path());
}

// memory.csv under a budget: its rows stop at an iteration's end, and it says so.
TEST_F(TimelineSelection, ABudgetCutsMemoryCsvAtAnIterationEnd) {
  TempDir out("timeline-memory-budget");
  const auto result = run_tiny(out.path(), {"output.timeline_budget=20KB", "output.trace=false"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string kept = read_file(out.path() / "memory.csv");
  const std::string full = read_file(full_->path() / "memory.csv");
  EXPECT_LT(kept.size(), 20'000u);
  EXPECT_GT(kept.size(), 100u);
  EXPECT_LT(kept.size(), full.size());
  EXPECT_EQ(full.compare(0, kept.size(), kept), 0) << "the kept rows are the full file's first rows";
  EXPECT_NE(result.output.find("note: memory.csv: iterations "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("-6 left out to stay under 20 kB"), std::string::npos) << result.output;
  expect_same_simulation(out.path());
}

TEST_F(TimelineSelection, AboveSixtyFourRanksTheDefaultsKeepTheFirstNode) {
  TempDir out("timeline-default");
  const auto result = run_tiny(out.path(), {"cluster.hardware=h100-sxm-cluster", "cluster.nodes=9",
                                            "cluster.gpus_per_node=8", "training.iterations=3",
                                            "training.warmup_iterations=1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const TraceCounts kept = trace_counts(out.path() / "trace.json");
  EXPECT_EQ(kept.named_ranks, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(kept.spans_per_rank.size(), 8u);
  const auto sample_ranks = column(out.path() / "samples.csv", "rank");
  EXPECT_EQ(std::set<std::string>(sample_ranks.begin(), sample_ranks.end()).size(), 8u);
  EXPECT_EQ(column(out.path() / "buckets.csv", "rank").size(), 72u * 3u) << "buckets.csv keeps every rank";
  EXPECT_NE(result.output.find("note: trace.json: ranks 0-7 of 72 kept (the default above 64 ranks"),
            std::string::npos)
      << result.output;
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(summary["scenario"]["output"]["trace_ranks"], "first:8");
  EXPECT_EQ(summary["scenario"]["output"]["timeline_budget_bytes"], 200000000);
  // Choosing the ranks lifts that default; 64 ranks or fewer keep everything.
  TempDir chosen("timeline-chosen");
  const auto all = run_tiny(chosen.path(), {"cluster.hardware=h100-sxm-cluster", "cluster.nodes=8",
                                            "cluster.gpus_per_node=8", "training.iterations=3",
                                            "training.warmup_iterations=1"});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(trace_counts(chosen.path() / "trace.json").named_ranks.size(), 64u);
  EXPECT_EQ(all.output.find("timelines"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(read_file(chosen.path() / "summary.json")).count("timelines_left_out"), 0u);
}

}  // namespace

// samples.csv reader (strict errors naming file, line and column), controller replay on a
// hand-made samples file, and the `replay` command.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/cli_runner.hpp"
#include "core/control/controller_replay.hpp"
#include "core/input/input_error.hpp"
#include "core/control/samples_reader.hpp"
#include "tests/support/input_error_testing.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::expect_input_error;
using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;

namespace {

const char* kHeader = "iteration,rank,phase,wait_ns,interval_ns,host_wait_ns,host_interval_ns\n";

struct BadCase {
  const char* name;
  std::string text;
  int line;
  std::string key;
  std::string says;
};

}  // namespace

TEST(SamplesReader, ReadsBaseAndExtraColumns) {
  TempDir dir("samples");
  const auto file = dir.write("samples.csv", std::string(kHeader) +
                                                 "1,0,forward,10,100,11,101\n"
                                                 "1,1,backward,0,50,2,60\r\n"
                                                 "\n");
  const pc::SamplesFile s = pc::read_samples_csv(file, 2);
  EXPECT_EQ(s.extra_columns, (std::vector<std::string>{"host_wait_ns", "host_interval_ns"}));
  ASSERT_EQ(s.samples.size(), 2u);
  EXPECT_EQ(s.samples[1].rank, 1);
  EXPECT_EQ(s.samples[1].phase, pc::Phase::kBackward);
  EXPECT_EQ(s.samples[1].interval_ns, 50);
  EXPECT_EQ(s.samples[1].extra, (std::vector<std::int64_t>{2, 60}));  // host_wait_ns, host_interval_ns
  EXPECT_EQ(s.lines, (std::vector<int>{2, 3}));
}

TEST(SamplesReader, MalformedInputNamesFileLineAndColumn) {
  const std::vector<BadCase> cases = {
      {"bad_header", "iteration,rank,phase,wait,interval_ns\n1,0,forward,1,2\n", 1, "wait", "header"},
      {"missing_header", "", 1, "", "empty"},
      {"repeated_extra", "iteration,rank,phase,wait_ns,interval_ns,x,x\n", 1, "x", "repeated"},
      {"non_numeric", std::string(kHeader) + "1,0,forward,10,100,1,1\n1,0,forward,1O,100,1,1\n", 3, "wait_ns",
       "not an integer"},
      {"negative_time", std::string(kHeader) + "1,0,forward,10,-5,1,1\n", 2, "interval_ns", "out of range"},
      {"negative_host_time", std::string(kHeader) + "1,0,forward,10,5,-1,1\n", 2, "host_wait_ns", "out of range"},
      {"unknown_phase", std::string(kHeader) + "1,0,fwd,10,5,1,1\n", 2, "phase", "unknown phase 'fwd'"},
      {"rank_out_of_range", std::string(kHeader) + "1,0,forward,1,2,1,1\n1,2,forward,1,2,1,1\n", 3, "rank",
       "outside the world"},
      {"negative_rank", std::string(kHeader) + "1,-1,forward,1,2,1,1\n", 2, "rank", "outside the world"},
      {"iteration_zero", std::string(kHeader) + "0,0,forward,1,2,1,1\n", 2, "iteration", "out of range"},
      {"field_count", std::string(kHeader) + "1,0,forward,1,2,1\n", 2, "", "6 fields"},
      {"iteration_goes_back", std::string(kHeader) + "2,0,forward,1,2,1,1\n1,1,forward,1,2,1,1\n1,0,forward,1,2,1,1\n",
       4, "iteration", "after iteration 2"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir("samples-bad");
    const auto file = dir.write("s.csv", c.text);
    const pc::InputError e = expect_input_error([&] { pc::read_samples_csv(file, 2); });
    EXPECT_EQ(e.where().file, file.string());
    EXPECT_EQ(e.where().line, c.line);
    EXPECT_EQ(e.key(), c.key);
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.string() + ":" + std::to_string(c.line)), std::string::npos)
        << e.what();
  }
  const pc::InputError missing = expect_input_error([] { pc::read_samples_csv("/nonexistent/samples.csv", 1); });
  EXPECT_NE(std::string(missing.what()).find("/nonexistent/samples.csv"), std::string::npos);
}

namespace {

// Two ranks, iterations 1-4, ema_threshold with update_interval 1: iteration 1 records, rank 1
// stalls 30 % from iteration 2 on, rank 0 stalls 1 %; iteration 3 has no sample of rank 0.
const char* kHandMade =
    "iteration,rank,phase,wait_ns,interval_ns,host_wait_ns,host_interval_ns\n"
    "1,0,forward,900,1000,0,1000\n"
    "1,1,forward,900,1000,0,1000\n"
    "2,0,forward,10,1000,0,1000\n"
    "2,1,forward,300,1000,0,1000\n"
    "2,1,backward,0,1000,0,1000\n"
    "3,1,forward,300,1000,0,1000\n"
    "4,0,backward,10,1000,0,1000\n"
    "4,1,forward,300,1000,0,1000\n";

pc::ControllerConfig ema_every_iteration() {
  pc::ControllerConfig c;
  c.policy = pc::ControllerPolicy::kEmaThreshold;
  c.update_interval = 1;
  return c;
}

}  // namespace

TEST(Replay, HandMadeSamplesThroughEmaThreshold) {
  TempDir dir("replay");
  const pc::SamplesFile samples = pc::read_samples_csv(dir.write("samples.csv", kHandMade), 3);
  pc::ControllerContext context;
  context.initial_bucket_numel = 50'000'000;
  const auto buckets = pc::replay_controller(ema_every_iteration(), context, 3, samples);
  // Iterations 1..4 (the largest in the file) x ranks 0..2 (rank 2 has no sample at all).
  ASSERT_EQ(buckets.size(), 12u);
  std::ostringstream got;
  for (const auto& b : buckets) got << b.iteration << "," << b.rank << "," << b.bucket_numel << "\n";
  // 2: iteration 1 recorded -> skipped. 3: rank 2 has no sample of iteration 2 -> every rank
  // skips (allreduce_max). 4: rank 0 and 2 lack iteration 3 -> skip. 5 is past the file.
  EXPECT_EQ(got.str(),
            "1,0,50000000\n1,1,50000000\n1,2,50000000\n"
            "2,0,50000000\n2,1,50000000\n2,2,50000000\n"
            "3,0,50000000\n3,1,50000000\n3,2,50000000\n"
            "4,0,50000000\n4,1,50000000\n4,2,50000000\n");

  // In a world of 2 every iteration-2 view is valid: max(0.01, 0.3) grows both at 3; iteration
  // 3 lacks rank 0 -> skip + reset at 4.
  const auto two = pc::replay_controller(ema_every_iteration(), context, 2, samples);
  std::ostringstream got2;
  for (const auto& b : two) got2 << b.iteration << "," << b.rank << "," << b.bucket_numel << "\n";
  EXPECT_EQ(got2.str(),
            "1,0,50000000\n1,1,50000000\n"
            "2,0,50000000\n2,1,50000000\n"
            "3,0,62500000\n3,1,62500000\n"
            "4,0,62500000\n4,1,62500000\n");

  // agreement none: each rank alone. Rank 0 shrinks at 3 (0.01), rank 1 grows at 3 and 4.
  auto none = ema_every_iteration();
  none.agreement = pc::Agreement::kNone;
  const auto alone = pc::replay_controller(none, context, 2, samples);
  EXPECT_EQ(alone[4].bucket_numel, 45'000'000);
  EXPECT_EQ(alone[5].bucket_numel, 62'500'000);
  EXPECT_EQ(alone[6].bucket_numel, 45'000'000);  // rank 0 has no iteration-3 sample: skips
  EXPECT_EQ(alone[7].bucket_numel, 78'125'000);
}

TEST(Replay, Pr8431DecidesMidIterationAndBucketIsTakenAtTheFirstFetch) {
  // 12 host samples of rank 0 in iteration 1 with no host wait: the 10th shrinks (x0.9); the
  // bucket of iteration 2 is the one after all of iteration 1's samples.
  std::string text = kHeader;
  for (int k = 0; k < 12; ++k) text += "1,0,forward,500,1000,0,1000\n";
  text += "2,0,forward,500,1000,0,1000\n";
  TempDir dir("replay-pr");
  const pc::SamplesFile samples = pc::read_samples_csv(dir.write("samples.csv", text), 1);
  pc::ControllerConfig config;
  config.policy = pc::ControllerPolicy::kDeepSpeedPr8431;
  config.timing = pc::TimingSource::kHostTimers;
  config.agreement = pc::Agreement::kNone;
  pc::ControllerContext context;
  context.initial_bucket_numel = 50'000'000;
  const auto buckets = pc::replay_controller(config, context, 1, samples);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].bucket_numel, 50'000'000);
  EXPECT_EQ(buckets[1].bucket_numel, 45'000'000);
}

TEST(Replay, MissingOptionalColumnIsAnInputErrorNamingIt) {
  TempDir dir("replay-col");
  const auto file = dir.write("samples.csv", "iteration,rank,phase,wait_ns,interval_ns\n1,0,forward,1,2\n");
  const pc::SamplesFile samples = pc::read_samples_csv(file, 1);
  pc::ControllerConfig config;
  config.policy = pc::ControllerPolicy::kPaceSearch;
  config.memory_budget_bytes = 1'000'000'000;
  const pc::InputError e = expect_input_error([&] { pc::replay_controller(config, {}, 1, samples); });
  EXPECT_EQ(e.key(), "peak_reserved_bytes");
  EXPECT_EQ(e.where().line, 1);
  config.memory_budget_bytes = 0;  // without a budget the column is not needed
  EXPECT_EQ(pc::replay_controller(config, {}, 1, samples).size(), 1u);
}

namespace {
std::string scenario_text(const std::string& controller) {
  return "model: tiny-llama\n"
         "training: {micro_batch: 1, seq_len: 128, iterations: 4}\n"
         "cluster: {hardware: h100-sxm-8x, gpus_per_node: 2}\n"
         "zero: {stage3_prefetch_bucket_size: 5e7}\n" +
         controller;
}
}  // namespace

TEST(ReplayCommand, WritesBucketsForEveryIterationAndRank) {
  TempDir dir("replay-cli");
  const auto scenario = dir.write("s.yaml", scenario_text("controller:\n  policy: ema_threshold\n  update_interval: 1\n"));
  const auto samples = dir.write("samples.csv", kHandMade);
  const auto out = dir.path() / "buckets.csv";
  const auto result = run_cli("replay --scenario " + scenario.string() + " --samples " + samples.string() + " -o " +
                              out.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "iteration,rank,bucket_numel\n"
            "1,0,50000000\n1,1,50000000\n"
            "2,0,50000000\n2,1,50000000\n"
            "3,0,62500000\n3,1,62500000\n"
            "4,0,62500000\n4,1,62500000\n");
  // Without -o the same table goes to stdout.
  const auto stdout_run = run_cli("replay --scenario " + scenario.string() + " --samples " + samples.string());
  EXPECT_EQ(stdout_run.exit_code, 0);
  EXPECT_EQ(stdout_run.output, text.str());
}

TEST(ReplayCommand, RankOutsideTheWorldAndMissingColumnAreBadInput) {
  TempDir dir("replay-cli-bad");
  const auto scenario = dir.write("s.yaml", scenario_text(""));
  const auto samples = dir.write("samples.csv", std::string(kHeader) + "1,0,forward,1,2,1,1\n1,2,forward,1,2,1,1\n");
  const auto bad_rank = run_cli("replay --scenario " + scenario.string() + " --samples " + samples.string());
  EXPECT_EQ(bad_rank.exit_code, 2);
  EXPECT_NE(bad_rank.output.find(samples.string() + ":3"), std::string::npos) << bad_rank.output;
  EXPECT_NE(bad_rank.output.find("rank 2 is outside the world"), std::string::npos) << bad_rank.output;

  const auto budget = dir.write("b.yaml", scenario_text("controller: {policy: pace_search, memory_budget_bytes: 8GiB}\n"));
  const auto plain = dir.write("plain.csv", "iteration,rank,phase,wait_ns,interval_ns\n1,0,forward,1,2\n");
  const auto missing = run_cli("replay --scenario " + budget.string() + " --samples " + plain.string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("peak_reserved_bytes"), std::string::npos) << missing.output;
}

TEST(ReplayCommand, ReplayOfARunsOwnSamplesReproducesItsBucketsForStatic) {
  // The adaptive policies are checked the same way once the simulator runs them (issue 6,
  // "Done when" 2); the static policy runs today.
  TempDir dir("replay-run");
  const std::string scenario = std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/tiny-llama-2x-h100.yaml";
  const auto run = run_cli("run " + scenario + " -o " + dir.path().string() + " --set output.trace=false");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto out = dir.path() / "replayed.csv";
  const auto replay = run_cli("replay --scenario " + scenario + " --samples " + (dir.path() / "samples.csv").string() +
                              " -o " + out.string());
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_EQ(slurp(out), slurp(dir.path() / "buckets.csv"));
  EXPECT_NE(slurp(out).find("6,1,100000"), std::string::npos);
}

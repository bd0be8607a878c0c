// Metrics: summary statistics, the CSV row writers and the atomic JSON writer.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "core/io/csv_row_writer.hpp"
#include "core/io/json_file.hpp"
#include "core/metrics/metrics.hpp"
#include "core/metrics/metrics_csv.hpp"
#include "core/metrics/summary_json.hpp"
#include "prefetchlab/version.hpp"

namespace pc = prefetchlab::core;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("prefetchlab_metrics_" + std::to_string(::getpid()) + "_" + info->test_suite_name() +
             "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

pc::IterationRecord iteration(int number, std::int64_t step_time_ns) {
  pc::IterationRecord record;
  record.iteration = number;
  record.step_time_ns = step_time_ns;
  return record;
}

// Runs `action` and returns the message of the std::runtime_error it throws.
template <class F>
std::string runtime_error_message(F action) {
  try {
    action();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a std::runtime_error";
  return "";
}

}  // namespace

// ---------------------------------------------------------------- summary statistics

TEST(Median, OddEvenAndEmpty) {
  EXPECT_EQ(pc::median_ns({}), 0);
  EXPECT_EQ(pc::median_ns({7}), 7);
  EXPECT_EQ(pc::median_ns({30, 10, 20}), 20);
  // Even count: mean of the two middle values, rounded down.
  EXPECT_EQ(pc::median_ns({40, 10, 30, 20}), 25);  // (20 + 30) / 2
  EXPECT_EQ(pc::median_ns({4, 3}), 3);              // (3 + 4) / 2 = 3.5 -> 3
  EXPECT_EQ(pc::median_ns({INT64_MAX, INT64_MAX - 1}), INT64_MAX - 1);  // no overflow
}

TEST(Summarize, SteadyStepTimeIsTheMedianAfterWarmup) {
  pc::Metrics metrics;
  // Iteration 1 records the trace and is slow; the rest are steady.
  for (const auto& [number, ns] :
       std::vector<std::pair<int, std::int64_t>>{{1, 9000}, {2, 100}, {3, 300}, {4, 200}, {5, 400}}) {
    metrics.iterations.push_back(iteration(number, ns));
  }
  auto stats = pc::summarize(metrics, 1);
  EXPECT_EQ(stats.iterations, 5);
  EXPECT_EQ(stats.steady_iterations, 4);
  EXPECT_FALSE(stats.steady_from_all_iterations);
  EXPECT_EQ(stats.steady_step_time_ns, 250);  // median of {100, 200, 300, 400} = (200 + 300) / 2

  stats = pc::summarize(metrics, 2);
  EXPECT_EQ(stats.steady_iterations, 3);
  EXPECT_EQ(stats.steady_step_time_ns, 300);  // median of {300, 200, 400}

  stats = pc::summarize(metrics, 0);
  EXPECT_EQ(stats.steady_step_time_ns, 300);  // median of {9000, 100, 300, 200, 400}
}

TEST(Summarize, NoSteadyIterationUsesAllAndSaysSo) {
  pc::Metrics metrics;
  metrics.facts.micro_batch = 4;
  metrics.facts.ranks = 2;
  metrics.facts.model_flops_per_gpu_iteration = 1'000'000;
  metrics.iterations = {iteration(1, 500), iteration(2, 100), iteration(3, 200)};
  auto stats = pc::summarize(metrics, 10);
  EXPECT_TRUE(stats.steady_from_all_iterations);
  EXPECT_EQ(stats.steady_iterations, 3);
  EXPECT_EQ(stats.steady_step_time_ns, 200);

  // No iterations at all (interrupted before the first finished): zeros, no division by zero.
  metrics.iterations.clear();
  stats = pc::summarize(metrics, 10);
  EXPECT_FALSE(stats.steady_from_all_iterations);
  EXPECT_EQ(stats.steady_iterations, 0);
  EXPECT_EQ(stats.steady_step_time_ns, 0);
  EXPECT_EQ(stats.samples_per_second, 0.0);
  EXPECT_EQ(stats.tflops_per_gpu, 0.0);
  EXPECT_EQ(stats.mean_exposed_comm_ns, 0);
  EXPECT_TRUE(stats.bucket_trajectory_numel.empty());

  // Iterations whose step time is 0 (a degenerate model): rates stay 0.
  metrics.iterations = {iteration(1, 0), iteration(2, 0)};
  stats = pc::summarize(metrics, 1);
  EXPECT_EQ(stats.samples_per_second, 0.0);
  EXPECT_EQ(stats.tflops_per_gpu, 0.0);
}

TEST(Summarize, ThroughputFromKnownNumbers) {
  pc::Metrics metrics;
  metrics.facts.ranks = 4;
  metrics.facts.micro_batch = 8;
  metrics.facts.seq_len = 2048;
  // 5e13 model FLOPs per GPU per iteration.
  metrics.facts.model_flops_per_gpu_iteration = 50'000'000'000'000;
  metrics.iterations = {iteration(1, 900'000'000), iteration(2, 250'000'000),
                        iteration(3, 250'000'000), iteration(4, 250'000'000)};
  const auto stats = pc::summarize(metrics, 1);
  EXPECT_EQ(stats.steady_step_time_ns, 250'000'000);  // 0.25 s
  // Global batch per iteration = micro_batch x ranks = 8 x 4 = 32 samples; 32 / 0.25 s = 128/s.
  EXPECT_DOUBLE_EQ(stats.samples_per_second, 128.0);
  // 5e13 FLOP / 0.25 s = 2e14 FLOP/s = 200 TFLOPS per GPU.
  EXPECT_DOUBLE_EQ(stats.tflops_per_gpu, 200.0);
}

// Gradient accumulation 4: a step is 4 micro-batches, the 4th with the optimizer step. Figures
// are per optimizer step (the global batch), hand-computed below.
TEST(Summarize, GradientAccumulationReportsPerOptimizerStep) {
  pc::Metrics metrics;
  metrics.facts.ranks = 8;
  metrics.facts.micro_batch = 1;
  metrics.facts.seq_len = 4096;
  metrics.facts.grad_accum = 4;
  metrics.facts.model_flops_per_gpu_iteration = 100'000'000'000'000;  // 1e14 per micro-batch
  // Micro-batches take 100 ms, the one with the (CPU-offloaded) optimizer step 700 ms.
  for (int i = 1; i <= 12; ++i) {
    pc::IterationRecord record = iteration(i, i % 4 == 0 ? 700'000'000 : 100'000'000);
    record.optimizer_step = i % 4 == 0;
    metrics.iterations.push_back(record);
  }
  metrics.iterations[0].step_time_ns = 2'000'000'000;  // the trace-recording iteration
  const auto stats = pc::summarize(metrics, 2);
  // Steps 1-4, 5-8, 9-12; the steady ones start past warm-up iteration 2: 5-8 and 9-12,
  // each 3 x 100 + 700 = 1000 ms.
  EXPECT_EQ(stats.steady_optimizer_steps, 2);
  EXPECT_EQ(stats.steady_step_time_ns, 1'000'000'000);
  EXPECT_FALSE(stats.step_time_from_micro_batches);
  // The median micro-batch (iterations 3-12: seven of 100 ms, three of 700 ms) is 100 ms; the old
  // figure would have been 8 samples / 0.1 s = 80/s.
  EXPECT_EQ(stats.steady_micro_batch_time_ns, 100'000'000);
  // Global batch = 1 x 8 ranks x 4 = 32 samples per 1 s.
  EXPECT_DOUBLE_EQ(stats.samples_per_second, 32.0);
  EXPECT_DOUBLE_EQ(stats.tokens_per_second, 32.0 * 4096);
  // 4 x 1e14 FLOP per GPU per 1 s = 400 TFLOPS.
  EXPECT_DOUBLE_EQ(stats.tflops_per_gpu, 400.0);

  // A trailing step without its optimizer step is not a step.
  metrics.iterations.resize(10);
  EXPECT_EQ(pc::optimizer_step_times(metrics.iterations, 4).size(), 2u);
  EXPECT_EQ(pc::summarize(metrics, 2).steady_optimizer_steps, 1);

  // Fewer iterations than one step: grad_accum x the micro-batch median, said so.
  metrics.iterations.resize(3);
  const auto short_run = pc::summarize(metrics, 0);
  EXPECT_TRUE(short_run.step_time_from_micro_batches);
  EXPECT_EQ(short_run.steady_step_time_ns, 4 * 100'000'000);
}

TEST(Summarize, MeansPeaksAndBucketTrajectory) {
  pc::Metrics metrics;
  for (int i = 1; i <= 3; ++i) {
    auto record = iteration(i, 1000);
    record.bucket_numel = 50'000'000 + i;
    metrics.iterations.push_back(record);
  }
  // Warmup iteration 1: large stall and the largest gathered peak, which still counts as a peak.
  metrics.iterations[0].exposed_comm_ns = 999;
  metrics.iterations[0].forward_stall_ns = 999;
  metrics.iterations[0].peak_gathered_param_bytes = 7000;
  metrics.iterations[1].exposed_comm_ns = 10;
  metrics.iterations[2].exposed_comm_ns = 11;
  metrics.iterations[1].forward_stall_ns = 4;
  metrics.iterations[2].forward_stall_ns = 6;
  metrics.iterations[1].backward_stall_ns = 1;
  metrics.iterations[2].backward_stall_ns = 2;
  metrics.iterations[2].peak_allocated_bytes = 100;
  metrics.iterations[2].peak_reserved_bytes = 200;
  // A memory point above the iteration peaks (reserved) and below them (allocated).
  metrics.memory = {{5, 0, 90, 300}, {6, 1, 50, 150}};

  const auto stats = pc::summarize(metrics, 1);
  EXPECT_EQ(stats.mean_exposed_comm_ns, 10);    // (10 + 11) / 2 = 10.5 -> 10
  EXPECT_EQ(stats.mean_forward_stall_ns, 5);    // (4 + 6) / 2
  EXPECT_EQ(stats.mean_backward_stall_ns, 1);   // (1 + 2) / 2 = 1.5 -> 1
  EXPECT_EQ(stats.peak_gathered_param_bytes, 7000);
  EXPECT_EQ(stats.peak_allocated_bytes, 100);
  EXPECT_EQ(stats.peak_reserved_bytes, 300);
  EXPECT_EQ(stats.bucket_trajectory_numel,
            (std::vector<std::int64_t>{50'000'001, 50'000'002, 50'000'003}));
}

TEST(Metrics, NamesAndExitCodes) {
  EXPECT_STREQ(pc::phase_name(pc::Phase::kForward), "forward");
  EXPECT_STREQ(pc::phase_name(pc::Phase::kBackward), "backward");
  EXPECT_EQ(pc::parse_phase("backward"), pc::Phase::kBackward);
  EXPECT_FALSE(pc::parse_phase("Forward"));
  EXPECT_EQ(pc::parse_trace_mode("complete"), pc::TraceMode::kComplete);
  EXPECT_STREQ(pc::trace_mode_name(pc::TraceMode::kRecord), "record");

  const std::vector<std::tuple<pc::RunStatus, const char*, int>> expected{
      {pc::RunStatus::kOk, "ok", 0},
      {pc::RunStatus::kError, "error", 1},
      {pc::RunStatus::kCollectiveMismatch, "collective_mismatch", 3},
      {pc::RunStatus::kOutOfMemory, "oom", 4},
      {pc::RunStatus::kInterrupted, "interrupted", 130},
  };
  for (const auto& [status, name, code] : expected) {
    EXPECT_STREQ(pc::run_status_name(status), name);
    EXPECT_EQ(pc::run_status_exit_code(status), code);
    EXPECT_EQ(pc::parse_run_status(name), status);
  }
  EXPECT_FALSE(pc::parse_run_status("OK"));
}

// ---------------------------------------------------------------- CSV

TEST(Csv, FieldFormats) {
  EXPECT_EQ(pc::CsvField(0).text(), "0");
  EXPECT_EQ(pc::CsvField(INT64_MAX).text(), "9223372036854775807");
  EXPECT_EQ(pc::CsvField(INT64_MIN).text(), "-9223372036854775808");
  EXPECT_EQ(pc::CsvField(UINT64_MAX).text(), "18446744073709551615");
  EXPECT_EQ(pc::CsvField(std::size_t{42}).text(), "42");
  EXPECT_EQ(pc::CsvField(true).text(), "1");
  EXPECT_EQ(pc::CsvField(false).text(), "0");
  // Shortest text that reads back to the same double, whatever the locale.
  EXPECT_EQ(pc::CsvField(0.1).text(), "0.1");
  EXPECT_EQ(pc::CsvField(2.5).text(), "2.5");
  EXPECT_EQ(pc::CsvField(3.0).text(), "3");
  EXPECT_EQ(pc::CsvField(-1e20).text(), "-1e+20");
  EXPECT_EQ(pc::CsvField(1.0 / 3.0).text(), "0.3333333333333333");
}

TEST(Csv, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(pc::csv_escape("plain text"), "plain text");
  EXPECT_EQ(pc::csv_escape(""), "");
  EXPECT_EQ(pc::csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(pc::csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(pc::csv_escape("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(pc::csv_escape("cr\r"), "\"cr\r\"");

  TempDir dir;
  pc::CsvRowWriter writer(dir / "q.csv", {"name", "value"});
  writer.append({"llama,7b", 1});
  writer.append({std::string("x\"y"), 2.5});
  EXPECT_EQ(read_file(dir / "q.csv"), "name,value\n\"llama,7b\",1\n\"x\"\"y\",2.5\n");
}

TEST(Csv, EveryAppendIsOnDiskBeforeTheWriterCloses) {
  TempDir dir;
  const fs::path path = dir / "iterations.csv";
  pc::BucketsCsv writer(path);
  EXPECT_EQ(read_file(path), "iteration,rank,bucket_numel\n");
  writer.append(pc::BucketRecord{1, 0, 50'000'000});
  EXPECT_EQ(read_file(path), "iteration,rank,bucket_numel\n1,0,50000000\n");
  const std::vector<pc::BucketRecord> batch{{2, 0, 62'500'000}, {2, 1, 62'500'000}};
  writer.append(batch);
  EXPECT_EQ(read_file(path),
            "iteration,rank,bucket_numel\n1,0,50000000\n2,0,62500000\n2,1,62500000\n");
}

TEST(Csv, RowWidthMustMatchTheHeader) {
  TempDir dir;
  pc::CsvRowWriter writer(dir / "w.csv", {"a", "b"});
  EXPECT_THROW(writer.append({1}), std::invalid_argument);
  EXPECT_THROW(writer.append({1, 2, 3}), std::invalid_argument);
  writer.append({1, 2});
  writer.close();
  EXPECT_EQ(read_file(dir / "w.csv"), "a,b\n1,2\n");
  EXPECT_EQ(writer.rows_written(), 1u);
}

TEST(Csv, IterationsHeaderAndRow) {
  TempDir dir;
  pc::IterationRecord r;
  r.iteration = 3;
  r.optimizer_step = true;
  r.trace_mode = pc::TraceMode::kComplete;
  r.start_ns = 1'000;
  r.step_time_ns = 2'000;
  r.forward_ns = 700;
  r.backward_ns = 1'100;
  r.optimizer_ns = 200;
  r.compute_ns = 1'500;
  r.forward_stall_ns = 30;
  r.backward_stall_ns = 40;
  r.exposed_comm_ns = 90;
  r.all_gather_ns = 800;
  r.reduce_scatter_ns = 600;
  r.all_gather_count = 12;
  r.reduce_scatter_count = 5;
  r.gathered_numel = 124'439'808;
  r.bucket_numel = 50'000'000;
  r.peak_gathered_param_bytes = 100'000'000;
  r.peak_allocated_bytes = 3'000'000'000;
  r.peak_reserved_bytes = 4'000'000'000;
  {
    pc::IterationsCsv writer(dir / "iterations.csv");
    writer.append(r);
  }
  EXPECT_EQ(read_file(dir / "iterations.csv"),
            "iteration,step,trace_mode,start_ns,step_time_ns,forward_ns,backward_ns,optimizer_ns,"
            "compute_ns,forward_stall_ns,backward_stall_ns,exposed_comm_ns,all_gather_ns,"
            "reduce_scatter_ns,all_gather_count,reduce_scatter_count,gathered_numel,bucket_numel,"
            "peak_gathered_param_bytes,peak_allocated_bytes,peak_reserved_bytes\n"
            "3,1,complete,1000,2000,700,1100,200,1500,30,40,90,800,600,12,5,124439808,50000000,"
            "100000000,3000000000,4000000000\n");
}

TEST(Csv, MemoryHeaderAndRow) {
  TempDir dir;
  {
    pc::MemoryCsv writer(dir / "memory.csv");
    writer.append(pc::MemoryPoint{123'456, 7, 1 << 20, 2 << 20});
  }
  EXPECT_EQ(read_file(dir / "memory.csv"),
            "time_ns,rank,allocated_bytes,reserved_bytes\n123456,7,1048576,2097152\n");
}

TEST(Csv, SamplesWithDeclaredExtraColumns) {
  TempDir dir;
  {
    pc::SamplesCsv plain(dir / "plain.csv");
    plain.append(pc::TimingSample{2, 1, pc::Phase::kBackward, 1'500, 20'000, {}});
  }
  EXPECT_EQ(read_file(dir / "plain.csv"),
            "iteration,rank,phase,wait_ns,interval_ns\n2,1,backward,1500,20000\n");

  pc::SamplesCsv writer(dir / "samples.csv", {"fetch_numel", "host_wait_ns"});
  EXPECT_EQ(writer.extra_columns(), (std::vector<std::string>{"fetch_numel", "host_wait_ns"}));
  writer.append(pc::TimingSample{2, 0, pc::Phase::kForward, 0, 9'000, {2'359'296, 12}});
  // Missing or extra values are refused, and nothing is written for them.
  EXPECT_THROW(writer.append(pc::TimingSample{2, 0, pc::Phase::kForward, 0, 1, {}}),
               std::invalid_argument);
  EXPECT_THROW(writer.append(pc::TimingSample{2, 0, pc::Phase::kForward, 0, 1, {1}}), std::invalid_argument);
  EXPECT_THROW(writer.append(pc::TimingSample{2, 0, pc::Phase::kForward, 0, 1, {1, 2, 3}}),
               std::invalid_argument);
  EXPECT_EQ(read_file(dir / "samples.csv"),
            "iteration,rank,phase,wait_ns,interval_ns,fetch_numel,host_wait_ns\n"
            "2,0,forward,0,9000,2359296,12\n");

  EXPECT_THROW(pc::SamplesCsv(dir / "bad1.csv", {"wait_ns"}), std::invalid_argument);
  EXPECT_THROW(pc::SamplesCsv(dir / "bad2.csv", {"a", "a"}), std::invalid_argument);
  EXPECT_THROW(pc::SamplesCsv(dir / "bad3.csv", {"has,comma"}), std::invalid_argument);
  EXPECT_THROW(pc::SamplesCsv(dir / "bad4.csv", {""}), std::invalid_argument);
}

TEST(Csv, UnwritablePathNamesPathAndReason) {
  TempDir dir;
  const fs::path path = dir / "no_such_dir" / "iterations.csv";
  const std::string message = runtime_error_message([&] { pc::IterationsCsv writer(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
}

// ---------------------------------------------------------------- JSON

TEST(JsonFile, AtomicWriteReplacesOlderFileAndLeavesNoTmp) {
  TempDir dir;
  const fs::path path = dir / "summary.json";
  {
    std::ofstream old(path);
    old << "an older, longer file that must disappear entirely\n";
  }
  nlohmann::ordered_json doc;
  doc["status"] = "ok";
  doc["list"] = {1, 2};
  doc["nested"] = {{"b", 1}, {"a", 0.5}};
  pc::write_json_atomically(path, doc);
  EXPECT_EQ(read_file(path),
            "{\n  \"status\": \"ok\",\n  \"list\": [\n    1,\n    2\n  ],\n"
            "  \"nested\": {\n    \"b\": 1,\n    \"a\": 0.5\n  }\n}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);  // no temporary left

  // Plain nlohmann::json: keys sorted.
  pc::write_json_atomically(path, nlohmann::json{{"z", 1}, {"a", 2}});
  EXPECT_EQ(read_file(path), "{\n  \"a\": 2,\n  \"z\": 1\n}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(JsonFile, ErrorsNamePathAndReasonAndLeaveNoTmp) {
  TempDir dir;
  const fs::path missing = dir / "no_such_dir" / "summary.json";
  std::string message =
      runtime_error_message([&] { pc::write_json_atomically(missing, nlohmann::json::object()); });
  EXPECT_NE(message.find(missing.string()), std::string::npos) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;

  // The target is a non-empty directory: the rename fails, and the .tmp is cleaned up.
  const fs::path occupied = dir / "occupied";
  fs::create_directories(occupied / "inside");
  message =
      runtime_error_message([&] { pc::write_json_atomically(occupied, nlohmann::json::object()); });
  EXPECT_NE(message.find(occupied.string()), std::string::npos) << message;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path() << " left behind";
  }
}

TEST(SummaryJson, LayoutAndValues) {
  pc::Metrics metrics;
  metrics.facts = {2, 4, 1024, 8, 3'000'000'000'000};
  metrics.iterations = {iteration(1, 2'000'000'000), iteration(2, 1'000'000'000)};
  metrics.iterations[1].bucket_numel = 5;
  const auto stats = pc::summarize(metrics, 1);
  nlohmann::ordered_json scenario;
  scenario["seed"] = 7;
  const auto json = pc::summary_to_json(stats, pc::RunStatus::kInterrupted, scenario, "SIGINT");

  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "status", "exit_code", "message", "tool", "run", "steady_step_time_ns",
                      "steady_micro_batch_time_ns", "samples_per_second", "tokens_per_second",
                      "tflops_per_gpu", "mean_exposed_comm_ns",
                      "mean_stall_ns", "peak_gathered_param_bytes", "peak_allocated_bytes",
                      "peak_reserved_bytes", "bucket_trajectory_numel", "num_alloc_retries", "scenario"}));
  EXPECT_EQ(json["num_alloc_retries"], 0);
  EXPECT_FALSE(json.contains("peak_reserved_breakdown"));  // no allocator simulated
  // With the allocator's account: the breakdown sums to the peak, which the summary's peak covers
  // even when no iteration record reached it (an OOM's unfinished iteration).
  pc::Metrics with_peak = metrics;
  with_peak.num_alloc_retries = 3;
  with_peak.peak_memory = pc::PeakMemoryBreakdown{1, 9'000'000'000, 8'000'000'000, 5'000'000'000, 2'000'000'000,
                                                  600'000'000, 400'000'000};
  const auto peak_json = pc::summary_to_json(pc::summarize(with_peak, 1), pc::RunStatus::kOutOfMemory, scenario, "");
  EXPECT_EQ(peak_json["num_alloc_retries"], 3);
  EXPECT_EQ(peak_json["peak_reserved_bytes"], 9'000'000'000LL);
  EXPECT_EQ(peak_json["peak_reserved_breakdown"]["allocator_cache_bytes"], 1'000'000'000LL);
  EXPECT_EQ(peak_json["peak_reserved_breakdown"]["rank"], 1);
  EXPECT_EQ(json["status"], "interrupted");
  EXPECT_EQ(json["exit_code"], 130);
  EXPECT_EQ(json["message"], "SIGINT");
  EXPECT_EQ(json["tool"]["version"], prefetchlab::kVersion);
  EXPECT_EQ(json["run"]["ranks"], 2);
  EXPECT_EQ(json["run"]["steady_iterations"], 1);
  EXPECT_EQ(json["run"]["steady_from_all_iterations"], false);
  // grad_accum 8 and no optimizer step among the records: a step is 8 micro-batches of 1 s.
  EXPECT_EQ(json["run"]["step_time_from_micro_batches"], true);
  EXPECT_EQ(json["steady_micro_batch_time_ns"], 1'000'000'000);
  EXPECT_EQ(json["steady_step_time_ns"], 8'000'000'000);
  EXPECT_DOUBLE_EQ(json["samples_per_second"].get<double>(), 8.0);  // 4 x 2 x 8 samples / 8 s
  EXPECT_DOUBLE_EQ(json["tokens_per_second"].get<double>(), 8.0 * 1024);
  EXPECT_DOUBLE_EQ(json["tflops_per_gpu"].get<double>(), 3.0);      // 8 x 3e12 FLOP / 8 s
  EXPECT_EQ(json["bucket_trajectory_numel"], nlohmann::ordered_json({0, 5}));
  EXPECT_EQ(json["scenario"]["seed"], 7);
}

// Same inputs, written twice: identical bytes in every file.
TEST(Determinism, IdenticalInputsGiveIdenticalFiles) {
  pc::Metrics metrics;
  metrics.facts = {8, 2, 2048, 4, 123'456'789'012};
  for (int i = 1; i <= 6; ++i) {
    auto record = iteration(i, 1'000'000 + 37 * i);
    record.optimizer_step = i % 4 == 0;
    record.trace_mode = i == 1 ? pc::TraceMode::kRecord : pc::TraceMode::kComplete;
    record.bucket_numel = 50'000'000 + i;
    record.exposed_comm_ns = 1000 * i;
    metrics.iterations.push_back(record);
    for (int rank = 0; rank < 8; ++rank) {
      metrics.buckets.push_back({i, rank, record.bucket_numel});
      metrics.samples.push_back({i, rank, pc::Phase::kBackward, 11 * rank, 1000 + i, {i}});
      metrics.memory.push_back({1000 * i + rank, rank, 100 * i, 200 * i});
    }
  }
  nlohmann::ordered_json scenario;
  scenario["name"] = "determinism, \"quoted\"";
  scenario["seed"] = 42;

  TempDir dir;
  const auto write_all = [&](const fs::path& out) {
    fs::create_directories(out);
    pc::IterationsCsv iterations(out / "iterations.csv");
    pc::SamplesCsv samples(out / "samples.csv", {"k"});
    pc::BucketsCsv buckets(out / "buckets.csv");
    pc::MemoryCsv memory(out / "memory.csv");
    iterations.append(std::span<const pc::IterationRecord>(metrics.iterations));
    samples.append(std::span<const pc::TimingSample>(metrics.samples));
    buckets.append(std::span<const pc::BucketRecord>(metrics.buckets));
    memory.append(std::span<const pc::MemoryPoint>(metrics.memory));
    pc::write_json_atomically(
        out / "summary.json",
        pc::summary_to_json(pc::summarize(metrics, 2), pc::RunStatus::kOk, scenario));
  };
  write_all(dir / "a");
  write_all(dir / "b");
  for (const char* name :
       {"iterations.csv", "samples.csv", "buckets.csv", "memory.csv", "summary.json"}) {
    const std::string a = read_file(dir / "a" / name);
    EXPECT_FALSE(a.empty()) << name;
    EXPECT_EQ(a, read_file(dir / "b" / name)) << name;
  }
  EXPECT_TRUE(read_file(dir / "a" / "buckets.csv")
                  .starts_with("iteration,rank,bucket_numel\n1,0,50000001\n1,1,50000001\n"));
}

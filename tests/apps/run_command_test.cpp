// `prefetchlab run` through the real binary: every bundled scenario meets its `expect:` section,
// outputs are byte-identical for the same scenario and seed, trace.json is a valid Chrome trace
// whose spans nest per track, and row files carry the documented columns.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/cli_runner.hpp"
#include "tests/support/sanitizer.hpp"
#include "sim/trace/trace_validation.hpp"

using prefetchlab::testing::run_cli;
using prefetchlab::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kScenarios = fs::path(PREFETCHLAB_SOURCE_DIR) / "scenarios";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<fs::path> bundled_scenarios(const fs::path& dir = kScenarios) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every file runs, with status ok and every check of its expect: section met.
void check_expectations_met(const std::vector<fs::path>& files) {
  for (const auto& file : files) {
    TempDir out("run");
    const auto result = run_cli("run " + file.string() + " -o " + out.path().string() + " --set output.trace=false");
    ASSERT_EQ(result.exit_code, 0) << file << "\n" << result.output;
    const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
    EXPECT_EQ(summary["status"], "ok") << file;
    ASSERT_TRUE(summary["expectations"].is_array()) << file;
    EXPECT_FALSE(summary["expectations"].empty()) << file << " has no expect: section";
    for (const auto& check : summary["expectations"]) {
      EXPECT_TRUE(check["met"].get<bool>()) << file << ": " << check.dump();
    }
  }
}

}  // namespace

TEST(RunCommand, EveryBundledScenarioMeetsItsExpectations) {
  const auto files = bundled_scenarios();
  ASSERT_GE(files.size(), 6u);
  check_expectations_met(files);
}

// The scenarios sized for the host-thread device (validate --backend host) are simulator
// scenarios like the others.
TEST(RunCommand, EveryHostScenarioMeetsItsExpectations) {
  const auto files = bundled_scenarios(kScenarios / "host");
  ASSERT_GE(files.size(), 2u);
  check_expectations_met(files);
}

// The scenarios sized for one real GPU (gpu_backend/gpu-check.sh validates them) are simulator
// scenarios too.
TEST(RunCommand, EveryGpuScenarioMeetsItsExpectations) {
  const auto files = bundled_scenarios(kScenarios / "gpu");
  ASSERT_GE(files.size(), 1u);
  check_expectations_met(files);
}

TEST(RunCommand, EveryDefectScenarioShowsItsDefect) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kScenarios / "defects")) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  for (const auto& file : files) {
    TempDir out("defect");
    const auto result = run_cli("run " + file.string() + " -o " + out.path().string() + " --set output.trace=false");
    const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
    EXPECT_EQ(result.exit_code, summary["exit_code"].get<int>()) << file;
    if (summary["status"] != "ok") {
      EXPECT_FALSE(summary["message"].get<std::string>().empty()) << file;
    }
    for (const auto& check : summary["expectations"]) {
      EXPECT_TRUE(check["met"].get<bool>()) << file << ": " << check.dump();
    }
  }
}

// Each review-defect scenario flips one switch of the fixed controller; flipping it back must
// make the defect's outcome disappear (at least one of its expectations fails).
TEST(RunCommand, FlippingEachDefectSwitchBackRemovesTheDefect) {
  const std::vector<std::pair<std::string, std::string>> fixes{
      {"a-agreement-none.yaml", "controller.agreement=allreduce_max"},
      {"b-host-timers.yaml", "controller.timing=device_events"},
      {"c-sample-during-record.yaml", "controller.sample_during_record=false"},
      {"d-no-initial-clamp.yaml", "controller.clamp_initial=true"},
  };
  for (const auto& [file, fix] : fixes) {
    TempDir out("fixed");
    const auto result =
        run_cli("run " + (kScenarios / "defects" / file).string() + " -o " + out.path().string() + " --set " + fix);
    // The defect's expectations are no longer met: exit code 5, recorded in summary.json too.
    EXPECT_EQ(result.exit_code, 5) << file << " with " << fix << ":\n" << result.output;
    const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
    bool all_met = true;
    for (const auto& check : summary["expectations"]) all_met = all_met && check["met"].get<bool>();
    EXPECT_FALSE(all_met) << file << ": the defect's outcome persists with " << fix;
    EXPECT_EQ(summary["exit_code"], 5) << file;
    EXPECT_EQ(summary["status"], "ok") << file;
  }
}

TEST(RunCommand, CollectiveMismatchNamesIterationRanksSizesAndModules) {
  TempDir out("mismatch");
  const auto result = run_cli("run " + (kScenarios / "defects" / "rank-divergent-control-flow.yaml").string() +
                              " -o " + out.path().string() + " --set output.trace=false");
  EXPECT_EQ(result.exit_code, 3);
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(summary["status"], "collective_mismatch");
  EXPECT_EQ(summary["message"],
            "collective mismatch at communicator call 312 (iteration 4): ranks 0-2,4-7: all_gather of 3538944 "
            "bytes issued by transformer.h.11.attn.c_attn; rank 3: all_gather of 77194752 bytes issued by lm_head");
  // The three finished iterations were written before the hang.
  const std::string iterations = read_file(out.path() / "iterations.csv");
  EXPECT_EQ(std::count(iterations.begin(), iterations.end(), '\n'), 1 + 3);
}

TEST(RunCommand, InterruptedRunKeepsFinishedIterationsAndSaysSo) {
  // SIGINT (Ctrl-C), SIGTERM (scancel, a time limit) or SIGHUP after a moment into a long run:
  // the summary says "interrupted", the exit code is 130, and iterations.csv holds exactly the
  // iterations the summary counts.
  for (const char* signal : {"INT", "TERM", "HUP"}) {
    TempDir out("interrupt");
    const auto result =
        run_cli("run " + (kScenarios / "default.yaml").string() + " -o " + out.path().string() +
                    " --set output.trace=false --set training.iterations=100000",
                "timeout --preserve-status -s " + std::string(signal) + " 1.5 ");
    EXPECT_EQ(result.exit_code, 130) << signal << "\n" << result.output;
    const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
    EXPECT_EQ(summary["status"], "interrupted") << signal;
    const std::string iterations = read_file(out.path() / "iterations.csv");
    const auto rows = std::count(iterations.begin(), iterations.end(), '\n') - 1;
    EXPECT_EQ(rows, summary["run"]["iterations"].get<int>()) << signal;
    EXPECT_LT(rows, 100000);
  }
}

// A run killed outright (kill -9, the OOM killer) cannot write its summary: the one it wrote
// first says "running", so the folder's partial rows are never read as a finished run, even
// where an older run's "ok" summary was.
TEST(RunCommand, AKilledRunLeavesASummarySayingRunning) {
  TempDir out("killed");
  const std::string base = "run " + (kScenarios / "default.yaml").string() + " -o " + out.path().string() +
                           " --set output.trace=false";
  ASSERT_EQ(run_cli(base + " --set training.iterations=3").exit_code, 0);
  ASSERT_EQ(nlohmann::json::parse(read_file(out.path() / "summary.json"))["status"], "ok");
  const auto result = run_cli(base + " --set training.iterations=100000", "timeout -s KILL 1.5 ");
  EXPECT_EQ(result.exit_code, 137) << result.output;
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(summary["status"], "running");
  EXPECT_EQ(summary["scenario"]["training"]["iterations"], 100000);
}

// Host memory that runs out (here a 320 MB address-space limit under a run that needs ~370 MB)
// is said on stderr with exit code 4, not a silent SIGABRT, and summary.json says the run did
// not end (issue 46, R2; issue 45, item 4).
TEST(RunCommand, RunningOutOfHostMemoryIsExitFourWithAMessage) {
#ifdef PREFETCHLAB_SANITIZED
  GTEST_SKIP() << "a sanitizer's shadow memory does not fit under an address-space limit";
#else
  TempDir out("host-oom");
  const auto result =
      run_cli("run " + (kScenarios / "default.yaml").string() + " -o " + out.path().string() +
                  " --no-expect --set training.iterations=3 --set output.trace=false"
                  " --set cluster.hardware=h100-sxm-cluster --set cluster.nodes=64 --every-rank --threads 1",
              "ulimit -v 320000; ");
  EXPECT_EQ(result.exit_code, 4) << result.output;
  EXPECT_NE(result.output.find("error: out of host memory"), std::string::npos) << result.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(out.path() / "summary.json"))["status"], "running");
#endif
}

TEST(RunCommand, SameScenarioAndSeedGiveByteIdenticalOutputs) {
  TempDir a("det-a");
  TempDir b("det-b");
  const std::string scenario = (kScenarios / "gpt2-small-divergence.yaml").string();
  ASSERT_EQ(run_cli("run " + scenario + " -o " + a.path().string()).exit_code, 0);
  ASSERT_EQ(run_cli("run " + scenario + " -o " + b.path().string()).exit_code, 0);
  for (const char* name : {"summary.json", "iterations.csv", "samples.csv", "buckets.csv", "trace.json"}) {
    const std::string first = read_file(a.path() / name);
    EXPECT_FALSE(first.empty()) << name;
    // summary.json names the output folder nowhere, so even it must match byte for byte.
    EXPECT_TRUE(first == read_file(b.path() / name)) << name << " differs between identical runs";
  }
}

TEST(RunCommand, TraceJsonIsValidAndCollectivesCarryTheirArgs) {
  TempDir out("trace");
  // Both ranks' tracks (a collapsed run has the one that stands for both).
  ASSERT_EQ(run_cli("run " + (kScenarios / "tiny-llama-2x-h100.yaml").string() + " -o " + out.path().string() +
                    " --every-rank")
                .exit_code,
            0);
  const auto trace = nlohmann::json::parse(read_file(out.path() / "trace.json"));
  const auto problems = prefetchlab::sim::validate_chrome_trace(trace);
  EXPECT_TRUE(problems.empty()) << problems.front();
  int collectives = 0, stalls = 0, named_threads = 0;
  for (const auto& event : trace["traceEvents"]) {
    ASSERT_TRUE(event.contains("ph") && event.contains("ts") && event.contains("pid") && event.contains("tid"));
    if (event["ph"] == "M" && event["name"] == "thread_name") ++named_threads;
    if (event["ph"] != "X") continue;
    const std::string name = event["name"];
    if (name == "all_gather" || name == "reduce_scatter" || name == "all_reduce") {
      ++collectives;
      for (const char* key : {"iteration", "phase", "kind", "issued_by", "modules", "numel", "bytes", "seq"}) {
        EXPECT_TRUE(event["args"].contains(key)) << "collective without " << key << ": " << event.dump();
      }
    }
    if (name.rfind("stall", 0) == 0) ++stalls;
  }
  EXPECT_GT(collectives, 0);
  EXPECT_EQ(named_threads, 2 * 5);  // 2 ranks x (host, compute, all-gather, reduce-scatter, NCCL)
  (void)stalls;
}

TEST(RunCommand, RowFilesHaveTheDocumentedColumns) {
  TempDir out("rows");
  ASSERT_EQ(run_cli("run " + (kScenarios / "tiny-llama-2x-h100.yaml").string() + " -o " + out.path().string() +
                    " --set output.trace=false")
                .exit_code,
            0);
  const std::string samples = read_file(out.path() / "samples.csv");
  EXPECT_EQ(samples.substr(0, samples.find('\n')),
            "iteration,rank,phase,wait_ns,interval_ns,host_wait_ns,host_interval_ns,peak_reserved_bytes");
  const std::string buckets = read_file(out.path() / "buckets.csv");
  EXPECT_EQ(buckets.substr(0, buckets.find('\n')), "iteration,rank,bucket_numel");
  const std::string iterations = read_file(out.path() / "iterations.csv");
  EXPECT_EQ(std::count(iterations.begin(), iterations.end(), '\n'), 1 + 6);  // header + 6 iterations
  EXPECT_NE(iterations.find(",step,"), std::string::npos);
  EXPECT_FALSE(fs::exists(out.path() / "trace.json"));
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(summary["scenario"]["training"]["seq_len"], 256);
  EXPECT_FALSE(summary["tool"]["version"].get<std::string>().empty());
}

TEST(RunCommand, BadScenarioExitsWithCode2AndWritesNoSummary) {
  TempDir out("bad");
  const auto result = run_cli("run " + (kScenarios / "tiny-llama-2x-h100.yaml").string() + " -o " +
                              out.path().string() + " --set training.seq_len=0");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_FALSE(fs::exists(out.path() / "summary.json"));
}

// Issue 22: an OOM run keeps its memory.csv rows up to the OOM, and its summary says what filled
// memory (a cap below the model states: the run stops before any iteration finishes).
TEST(RunCommand, OutOfMemoryKeepsMemoryRowsAndSaysWhatFilledMemory) {
  TempDir out("oom-rows");
  const auto result = run_cli("run " + (kScenarios / "tune" / "tiny-llama-2x-nvlink.yaml").string() + " -o " +
                              out.path().string() +
                              " --set output.trace=false --set output.memory_timeline=true"
                              " --set memory.allocator.per_process_memory_fraction=0.0123");
  EXPECT_EQ(result.exit_code, 4) << result.output;
  const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
  EXPECT_EQ(summary["status"], "oom");
  const std::string memory = read_file(out.path() / "memory.csv");
  const auto rows = std::count(memory.begin(), memory.end(), '\n') - 1;
  EXPECT_GT(rows, 0) << memory;
  const auto& peak = summary["peak_reserved_breakdown"];
  ASSERT_TRUE(peak.is_object()) << summary.dump(1);
  EXPECT_GT(peak["model_states_bytes"].get<std::int64_t>(), 0);
  const std::int64_t parts = peak["model_states_bytes"].get<std::int64_t>() + peak["activation_bytes"].get<std::int64_t>() +
                             peak["gathered_param_bytes"].get<std::int64_t>() + peak["gradient_bytes"].get<std::int64_t>() +
                             peak["allocator_cache_bytes"].get<std::int64_t>();
  EXPECT_EQ(parts, peak["reserved_bytes"].get<std::int64_t>());
  // The summary's peak is the allocator's, not 0 for want of a finished iteration.
  EXPECT_EQ(summary["peak_reserved_bytes"], peak["reserved_bytes"]);
}

// Issue 22: a run whose allocator frees its cache and retries (torch's num_alloc_retries) still
// ends ok, but counts the retries in the summary and warns at the end; without the pressure the
// same scenario has none.
TEST(RunCommand, AllocatorCacheFlushesAreCountedAndWarned) {
  const std::string scenario = (kScenarios / "tune" / "tiny-llama-2x-nvlink.yaml").string();
  TempDir pressed("retries");
  const auto result = run_cli("run " + scenario + " -o " + pressed.path().string() +
                              " --set output.trace=false --set memory.allocator.per_process_memory_fraction=0.0128");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  const auto summary = nlohmann::json::parse(read_file(pressed.path() / "summary.json"));
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_GT(summary["num_alloc_retries"].get<std::int64_t>(), 0);
  EXPECT_NE(result.output.find("warning: the caching allocator freed its cache and retried"), std::string::npos)
      << result.output;
  TempDir free_run("no-retries");
  const auto plain = run_cli("run " + scenario + " -o " + free_run.path().string() + " --set output.trace=false");
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(free_run.path() / "summary.json"))["num_alloc_retries"], 0);
  EXPECT_EQ(plain.output.find("warning: the caching allocator"), std::string::npos) << plain.output;
}

// Each bundled Hugging Face config runs on a cluster that holds it (two short iterations).
TEST(RunCommand, EveryBundledHfConfigRunsOnAClusterThatFitsIt) {
  const fs::path hf_dir = fs::path(PREFETCHLAB_SOURCE_DIR) / "models" / "hf";
  std::vector<fs::path> configs;
  for (const auto& entry : fs::directory_iterator(hf_dir)) {
    if (entry.path().extension() == ".json") configs.push_back(entry.path());
  }
  std::sort(configs.begin(), configs.end());
  ASSERT_GE(configs.size(), 10u);
  for (const auto& config : configs) {
    // Mixtral-8x7B's 46.7B parameters need 16 GPUs of 80 GiB for their optimizer states.
    const bool large = config.stem() == "mixtral-8x7b-v0.1";
    TempDir out("hf");
    const fs::path scenario = out.path() / "scenario.yaml";
    std::ofstream(scenario) << "model: " << config.string() << "\n"
                            << "training: {micro_batch: 1, seq_len: 128, iterations: 2, warmup_iterations: 1}\n"
                            << "cluster: {hardware: " << (large ? "h100-sxm-cluster, nodes: 2" : "h100-sxm-8x")
                            << ", gpus_per_node: 8}\n";
    const auto result = run_cli("run " + scenario.string() + " -o " + out.path().string() + " --set output.trace=false");
    ASSERT_EQ(result.exit_code, 0) << config << "\n" << result.output;
    const auto summary = nlohmann::json::parse(read_file(out.path() / "summary.json"));
    EXPECT_EQ(summary["status"], "ok") << config;
  }
}

// Two nodes of every bundled box, joined by one NIC each (the fewest rails: NCCL's NVLSTree has
// no bandwidth there and is not chosen), run to the end.
TEST(RunCommand, TwoNodesOfEveryBundledProfileRun) {
  for (const auto& entry : fs::directory_iterator(fs::path(PREFETCHLAB_SOURCE_DIR) / "hardware")) {
    const std::string hw = entry.path().stem().string();
    // Turing has no BF16 tensor cores: fp16 there (docs/scenarios.md).
    const std::string dtype = hw.rfind("rtx2080ti", 0) == 0 ? "fp16" : "bf16";
    TempDir out("two-nodes");
    const auto result = run_cli("run " + (kScenarios / "tiny-llama-2x-h100.yaml").string() + " -o " +
                                out.path().string() + " --no-expect --set output.trace=false --set training.iterations=3" +
                                " --set cluster.hardware=" + hw + " --set cluster.nodes=2 --set training.dtype=" + dtype +
                                " --set 'cluster.network={nics_per_node: 1, nic_gbit_per_s: 100}'");
    EXPECT_EQ(result.exit_code, 0) << hw << "\n" << result.output;
  }
}

// --threads: where every rank is simulated the ranks run on that many threads, and the run is
// the same, byte for byte, on any count: the trace too (each rank records its own spans), and
// where a timeline budget leaves iterations out; a count out of range is bad input.
TEST(RunCommand, ThreadCountsGiveTheSameRun) {
  const TempDir dir("run-threads");
  const std::string base = std::string(PREFETCHLAB_SOURCE_DIR) +
                           "/scenarios/default.yaml --no-expect --set training.iterations=3 "
                           "--set training.warmup_iterations=1 --set noise.compute_jitter=0.03 "
                           "--set output.memory_timeline=true --set output.timeline_budget=8MB";
  std::string stdout_one;
  for (const std::string threads : {"1", "2"}) {
    const auto result = run_cli("run " + base + " --threads " + threads + " -o " + (dir.path() / threads).string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("8 of 8"), std::string::npos) << result.output;
    if (threads == "1") {
      stdout_one = result.output;
      continue;
    }
    // The figures and the events simulated; the folder named as the other run's.
    std::string output = result.output;
    const std::string folder = (dir.path() / threads).string(), folder_one = (dir.path() / "1").string();
    for (auto at = output.find(folder); at != std::string::npos; at = output.find(folder, at)) {
      output.replace(at, folder.size(), folder_one);
    }
    EXPECT_EQ(stdout_one, output);
    EXPECT_NE(read_file(dir.path() / "1" / "summary.json").find("iterations 2-3 left out"), std::string::npos)
        << "the budget should leave iterations out";
    for (const char* file : {"summary.json", "iterations.csv", "buckets.csv", "samples.csv", "memory.csv", "trace.json"}) {
      EXPECT_EQ(read_file(dir.path() / "1" / file), read_file(dir.path() / "2" / file)) << file;
    }
  }
  const auto bad = run_cli("run " + base + " --threads -1 -o " + (dir.path() / "bad").string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--threads"), std::string::npos) << bad.output;
}

// Trace import on small traces built here, whose figures are known exactly.
#include <gtest/gtest.h>

#include <zlib.h>

#include <fstream>
#include <string>

#include "core/input/input_error.hpp"
#include "core/trace_import/collective_kind.hpp"
#include "core/trace_import/trace_file.hpp"
#include "core/trace_import/trace_set.hpp"
#include "core/trace_import/trace_summary.hpp"
#include "synthetic_trace.hpp"
#include "tests/support/cli_runner.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::SyntheticTrace;
using prefetchlab::testing::TempDir;

namespace {

// One ZeRO-3-like step per rank: two overlapping compute kernels (union 1100-1400 us), one
// all-gather whose sizes are only on its record_param_comms (linked by External id), launched
// inside c10d::_allgather_base_; the NCCL kernel runs [nccl_start, nccl_end).
SyntheticTrace zero3_rank(int rank, double nccl_start_us, double nccl_end_us, double step_dur_us) {
  SyntheticTrace t(rank, 2);
  t.step(1, 1000, step_dur_us);
  t.launch(1010, 1);
  t.kernel("ampere_sgemm_128x64_tn", 1100, 200, 1, 7);
  t.launch(1020, 2);
  t.kernel("vectorized_elementwise_kernel", 1250, 150, 2, 7);
  t.cpu("c10d::_allgather_base_", 1055, 40, "cpu_op", {});
  t.cpu("record_param_comms", 1060, 30, "cpu_op",
        {{"External id", 10}, {"Collective name", "_allgather_base"}, {"In msg nelems", 100}, {"Out msg nelems", 200},
         {"Group size", 2}, {"dtype", "BFloat16"}, {"Process Group Name", "0"}});
  t.launch(1070, 3, 10);
  t.kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", nccl_start_us, nccl_end_us - nccl_start_us, 3, 40,
           {{"External id", 10}});
  t.memory(1030, 512, 500);
  t.memory(1040, 400, 900);
  t.memory(1500, -200, 700);
  t.memory(2500, 512, 5000);  // after the step: not its peak
  return t;
}

pc::TraceSet two_ranks(const TempDir& dir) {
  const auto a = zero3_rank(0, 1350, 1600, 1000).write(dir.path() / "rank0.json");
  const auto b = zero3_rank(1, 1500, 1620, 1100).write(dir.path() / "rank1.json.gz", true);
  return pc::load_trace_set({a.string(), b.string()}, {});
}

}  // namespace

TEST(TraceImport, TimesAreReadFromTheDecimalTextToTheNanosecond) {
  // 16 significant digits: a double would round the last one.
  const pc::TraceFile trace = pc::read_trace_text(
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 4458676524648.797, "dur": 12.4225},
                          {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1669783687464300, "dur": 3}]})",
      "t.json");
  ASSERT_EQ(trace.events.size(), 2u);
  EXPECT_EQ(trace.events[0].ts_ns, 4458676524648797);
  EXPECT_EQ(trace.events[0].dur_ns, 12423);  // the 4th decimal rounds
  EXPECT_EQ(trace.events[1].ts_ns, 1669783687464300000);
}

TEST(TraceImport, ClassifiesCollectiveNamesAcrossGenerations) {
  pc::CollectiveKind kind{};
  ASSERT_TRUE(pc::nccl_kernel_kind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kAllReduce);
  ASSERT_TRUE(pc::nccl_kernel_kind("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kReduceScatter);
  ASSERT_TRUE(pc::nccl_kernel_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kSendRecv);
  ASSERT_TRUE(pc::nccl_kernel_kind("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kAllGather);
  EXPECT_FALSE(pc::nccl_kernel_kind("ampere_sgemm_128x64_tn", &kind));
  ASSERT_TRUE(pc::gloo_work_kind("gloo:all_gather", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kAllGather);
  EXPECT_EQ(pc::collective_kind_from_operation("_reduce_scatter_base"), pc::CollectiveKind::kReduceScatter);
  EXPECT_EQ(pc::collective_kind_from_operation("all_gather_into_tensor_coalesced"), pc::CollectiveKind::kAllGather);
  ASSERT_TRUE(pc::collective_call_kind("nccl:_all_gather_base", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kAllGather);
  ASSERT_TRUE(pc::collective_call_kind("c10d::alltoall_base_", &kind));
  EXPECT_EQ(kind, pc::CollectiveKind::kAllToAll);
}

TEST(TraceImport, MatchesCollectivesAcrossRanksForTrueTimeAndSkew) {
  TempDir dir("trace-import");
  const pc::TraceSet set = two_ranks(dir);
  ASSERT_EQ(set.ranks.size(), 2u);
  ASSERT_TRUE(set.cross_rank_times);
  ASSERT_EQ(set.matched.size(), 1u);
  const pc::MatchedCollective& m = set.matched[0];
  EXPECT_EQ(m.kind, pc::CollectiveKind::kAllGather);
  EXPECT_EQ(m.process_group, "0");
  EXPECT_EQ(m.elements, 200);        // the gathered (full) buffer
  EXPECT_EQ(m.true_ns, 100'000);     // min(end) 1600 - max(start) 1500
  EXPECT_EQ(m.skew_ns, 150'000);     // 1500 - 1350
  EXPECT_EQ(m.max_span_ns, 250'000);  // rank 0's span includes its wait

  const pc::RankCollective& c = set.ranks[0].collectives.at(0);
  EXPECT_EQ(c.in_nelems, 100);
  EXPECT_EQ(c.out_nelems, 200);
  EXPECT_EQ(c.dtype, "BFloat16");
  EXPECT_EQ(c.group_size, 2);
}

TEST(TraceImport, StepFiguresAreExact) {
  TempDir dir("trace-import");
  const pc::TraceSet set = two_ranks(dir);
  const pc::RankStep& r0 = set.ranks[0].steps.at(0);
  EXPECT_EQ(r0.number, 1);
  EXPECT_EQ(r0.duration_ns, 1'000'000);
  EXPECT_EQ(r0.compute_busy_ns, 300'000);  // union of [1100,1300) and [1250,1400)
  EXPECT_EQ(r0.exposed_comm_ns, 200'000);  // [1350,1600) less [1350,1400)
  EXPECT_EQ(r0.peak_allocated_bytes, 900);
  EXPECT_EQ(set.ranks[1].steps.at(0).exposed_comm_ns, 120'000);
  ASSERT_EQ(set.ranks[0].host_calls.size(), 1u);  // c10d::_allgather_base_ only (not its nested record_param_comms)
  EXPECT_EQ(set.ranks[0].host_calls[0].kind, pc::CollectiveKind::kAllGather);
  EXPECT_EQ(set.ranks[0].host_calls[0].duration_ns, 40'000);

  const pc::TraceSummary summary = pc::summarize_traces(set);
  ASSERT_EQ(summary.steps.size(), 1u);
  const pc::StepSummary& s = summary.steps[0];
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.step_ns.min, 1'000'000);
  EXPECT_EQ(s.step_ns.max, 1'100'000);
  ASSERT_EQ(s.collectives.size(), 1u);
  EXPECT_EQ(s.collectives[0].count_max, 1);
  EXPECT_EQ(s.collectives[0].elements, 200);
  EXPECT_EQ(s.collectives[0].true_ns, 100'000);
  EXPECT_EQ(s.collectives[0].skew_ns, 150'000);
  EXPECT_EQ(s.collectives[0].host_call_median_ns, 40'000);
  EXPECT_EQ(s.peak_allocated_bytes, 900);
}

TEST(TraceImport, GpuWorkBelongsToTheStepThatLaunchedIt) {
  // A kernel launched at the end of step 1 runs inside step 2's host window: it is step 1's.
  SyntheticTrace t(0, 1);
  t.step(1, 0, 100);
  t.step(2, 100, 100);
  t.launch(90, 1);
  t.kernel("sgemm", 120, 50, 1, 7);
  TempDir dir("trace-import");
  const auto set = pc::load_trace_set({t.write(dir.path() / "r.json").string()}, {});
  EXPECT_EQ(set.ranks[0].steps[0].compute_busy_ns, 50'000);
  EXPECT_EQ(set.ranks[0].steps[1].compute_busy_ns, 0);
}

TEST(TraceImport, OldTracesGiveSizesThroughInputDims) {
  // 2023-era: no collective metadata; the nccl:* annotation carries "Input Dims".
  SyntheticTrace t(0, 2);
  t.step(1, 0, 1000);
  t.cpu("nccl:all_reduce", 10, 50, "user_annotation", {{"Input Dims", {{394241}}}, {"Input type", {"float"}}});
  t.launch(20, 7);
  t.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 100, 80, 7, 84);
  const pc::TraceFile file = pc::read_trace_text(t.text(), "old.json");
  const pc::RankTimeline timeline = pc::build_rank_timeline(file, 0, {});
  ASSERT_EQ(timeline.collectives.size(), 1u);
  EXPECT_EQ(timeline.collectives[0].elements, 394241);
  EXPECT_EQ(timeline.collectives[0].kind, pc::CollectiveKind::kAllReduce);
  // No group in the file: said so.
  bool said = false;
  for (const auto& m : timeline.missing) said = said || m.find("process groups") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(TraceImport, SingleRankSaysItHasNoCrossRankTimes) {
  TempDir dir("trace-import");
  const auto a = zero3_rank(0, 1350, 1600, 1000).write(dir.path() / "rank0.json");
  const pc::TraceSet set = pc::load_trace_set({a.string()}, {});
  EXPECT_FALSE(set.cross_rank_times);
  const std::string text = pc::format_trace_summary(set, pc::summarize_traces(set));
  EXPECT_NE(text.find("cross-rank times: one rank only"), std::string::npos) << text;
  EXPECT_NE(text.find("host hooks: no python_function events"), std::string::npos) << text;
}

TEST(TraceImport, DivergingCollectiveOrderIsNamedNotMatched) {
  TempDir dir("trace-import");
  SyntheticTrace a = zero3_rank(0, 1350, 1600, 1000);
  SyntheticTrace b(1, 2);
  b.step(1, 1000, 1000);
  b.launch(1070, 3);
  b.kernel("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 1500, 100, 3, 40,
           {{"Collective name", "_reduce_scatter_base"}, {"In msg nelems", 200}, {"Out msg nelems", 100},
            {"Process Group Name", "0"}});
  const auto set = pc::load_trace_set(
      {a.write(dir.path() / "a.json").string(), b.write(dir.path() / "b.json").string()}, {});
  EXPECT_TRUE(set.matched.empty());
  ASSERT_EQ(set.notes.size(), 1u);
  EXPECT_NE(set.notes[0].find("all_gather of 200 elements on rank 0 but reduce_scatter"), std::string::npos) << set.notes[0];
}

// ---- bad traces: a clear InputError naming the file (and exit 2 from the command line) ----

namespace {

std::string error_of(const std::vector<std::string>& paths, pc::TimelineOptions options = {}) {
  try {
    pc::load_trace_set(paths, options);
  } catch (const pc::InputError& e) {
    return e.where().file + ": " + e.problem();
  }
  return "(no error)";
}

}  // namespace

TEST(TraceImportBadInput, EmptyFile) {
  TempDir dir("trace-bad");
  const auto path = dir.write("empty.json", "");
  EXPECT_EQ(error_of({path.string()}), path.string() + ": is empty");
}

TEST(TraceImportBadInput, NotJson) {
  TempDir dir("trace-bad");
  const auto path = dir.write("notes.json", "this is not a trace\n");
  const std::string error = error_of({path.string()});
  EXPECT_NE(error.find(path.string() + ": is not valid JSON at byte 2 (near 'th')"), std::string::npos) << error;
}

TEST(TraceImportBadInput, JsonThatIsNotATrace) {
  TempDir dir("trace-bad");
  const auto path = dir.write("config.json", R"({"train_batch_size": 8})");
  EXPECT_NE(error_of({path.string()}).find("no \"traceEvents\" array"), std::string::npos);
}

TEST(TraceImportBadInput, TruncatedGzip) {
  TempDir dir("trace-bad");
  SyntheticTrace t = zero3_rank(0, 1350, 1600, 1000);
  for (int i = 0; i < 200; ++i) t.cpu("aten::mm", 1000 + i, 1, "cpu_op", {{"External id", i}});
  const auto full = t.write(dir.path() / "full.json.gz", true);
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cut = dir.write("cut.json.gz", bytes.substr(0, bytes.size() / 2));
  const std::string error = error_of({cut.string()});
  EXPECT_NE(error.find(cut.string() + ": cannot be decompressed: the gzip stream ends early (truncated file)"),
            std::string::npos) << error;
}

TEST(TraceImportBadInput, TruncatedJson) {
  TempDir dir("trace-bad");
  const std::string text = zero3_rank(0, 1350, 1600, 1000).text();
  const auto cut = dir.write("cut.json", text.substr(0, text.size() / 2));
  EXPECT_NE(error_of({cut.string()}).find("the file is cut short"), std::string::npos);
}

TEST(TraceImportBadInput, NoSteps) {
  TempDir dir("trace-bad");
  SyntheticTrace t(0, 1);
  t.cpu("aten::mm", 10, 5, "cpu_op", {});
  const auto path = t.write(dir.path() / "nosteps.json");
  const std::string error = error_of({path.string()});
  EXPECT_NE(error.find(path.string() + ": has no steps"), std::string::npos) << error;
  pc::TimelineOptions whole;
  whole.whole_file_step = true;
  EXPECT_EQ(error_of({path.string()}, whole), "(no error)");
}

TEST(TraceImportBadInput, RanksOfDifferentJobs) {
  TempDir dir("trace-bad");
  const auto a = zero3_rank(0, 1350, 1600, 1000).write(dir.path() / "a.json");
  SyntheticTrace other(1, 4);  // a world of 4, not 2
  other.step(1, 0, 10);
  const auto b = other.write(dir.path() / "b.json");
  EXPECT_NE(error_of({a.string(), b.string()}).find("has world size 4 but " + a.string() + " has 2"), std::string::npos);
  // The same rank twice.
  const auto c = zero3_rank(0, 1350, 1600, 1000).write(dir.path() / "c.json");
  EXPECT_NE(error_of({a.string(), c.string()}).find("is rank 0, like " + a.string()), std::string::npos);
  // No step in common.
  SyntheticTrace late(1, 2);
  late.step(7, 0, 10);
  const auto d = late.write(dir.path() / "d.json");
  EXPECT_NE(error_of({a.string(), d.string()}).find("has no step in common"), std::string::npos);
}

TEST(TraceImportBadInput, WrongTypesAndHostileNesting) {
  TempDir dir("trace-bad");
  const auto string_ts = dir.write("ts.json", R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "12", "dur": 1}]})");
  EXPECT_NE(error_of({string_ts.string()}).find("event #0 ('a'): \"ts\" is a string"), std::string::npos);
  const auto deep = dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(error_of({deep.string()}).find("nested deeper than 64 levels"), std::string::npos);
  const auto missing = (dir.path() / "absent.json").string();
  EXPECT_NE(error_of({missing}).find("cannot be opened"), std::string::npos);
}

// Impossible values and ambiguous events (issue 46, W2, W4): an event longer than a day, and a key
// given twice in one event or its args, are refused naming the event.
// A small .json.gz that decompresses to one huge string (issue 46, R2: 1.5 MB once held a 1.5 GiB
// string and took 7.9 GB): refused once the string passes 16 MiB, whatever follows.
TEST(TraceImportBadInput, AGzipBombOfOneStringIsRefusedEarly) {
  TempDir dir("trace-bomb");
  const auto path = dir.path() / "bomb.json.gz";
  gzFile out = gzopen(path.c_str(), "wb1");
  ASSERT_NE(out, nullptr);
  const std::string head = R"({"traceEvents": [{"ph": "X", "name": ")";
  gzwrite(out, head.data(), static_cast<unsigned>(head.size()));
  const std::string block(1 << 20, 'a');
  for (int i = 0; i < 17; ++i) gzwrite(out, block.data(), static_cast<unsigned>(block.size()));
  const std::string tail = R"(", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})";
  gzwrite(out, tail.data(), static_cast<unsigned>(tail.size()));
  gzclose(out);
  EXPECT_LT(std::filesystem::file_size(path), 1u << 20);
  const std::string error = error_of({path.string()});
  EXPECT_NE(error.find("holds a JSON string longer than 16 MiB"), std::string::npos) << error;
}

TEST(TraceImportBadInput, ImplausibleDurationsAndDuplicateKeys) {
  TempDir dir("trace-bad");
  const auto long_kernel = dir.write(
      "long.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 9e12}]})");
  EXPECT_NE(error_of({long_kernel.string()}).find("event #0 ('k'): \"dur\" 9e12 us is longer than a day"), std::string::npos)
      << error_of({long_kernel.string()});
  const auto twice = dir.write(
      "twice.json", R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "dur": 900}]})");
  EXPECT_NE(error_of({twice.string()}).find("\"dur\" appears twice in one event"), std::string::npos)
      << error_of({twice.string()});
  const auto args_twice = dir.write(
      "args.json",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"Seq": 1, "Seq": 2}}]})");
  EXPECT_NE(error_of({args_twice.string()}).find("\"Seq\" appears twice in one event's args"), std::string::npos)
      << error_of({args_twice.string()});
}

TEST(TraceSummaryCommand, BadTracesExitTwoNamingTheFile) {
  TempDir dir("trace-cli");
  const auto empty = dir.write("empty.json", "");
  const auto result = prefetchlab::testing::run_cli("trace-summary " + empty.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(empty.string()), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("is empty"), std::string::npos) << result.output;
}

TEST(TraceSummaryCommand, SameInputSameBytes) {
  TempDir dir("trace-cli");
  const auto a = zero3_rank(0, 1350, 1600, 1000).write(dir.path() / "rank0.json");
  const auto b = zero3_rank(1, 1500, 1620, 1100).write(dir.path() / "rank1.json.gz", true);
  const std::string args = "trace-summary " + a.string() + " " + b.string() + " --json " + (dir.path() / "s.json").string();
  const auto first = prefetchlab::testing::run_cli(args);
  const auto second = prefetchlab::testing::run_cli(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, second.output);
  EXPECT_NE(first.output.find("all_gather      1        200           0.185     1        0.100     0.150     1      40.0"), std::string::npos) << first.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "s.json"));
}

// A folder stands for the traces in it (as torch.profiler's tensorboard_trace_handler writes one
// per rank): the same summary as the files named one by one; a folder without any is bad input.
TEST(TraceSummaryCommand, AFolderIsItsTraceFiles) {
  TempDir dir("trace-folder");
  const auto traces = dir.path() / "traces";
  std::filesystem::create_directories(traces);
  const auto a = zero3_rank(0, 1350, 1600, 1000).write(traces / "rank0.json");
  const auto b = zero3_rank(1, 1500, 1620, 1100).write(traces / "rank1.json.gz", true);
  std::ofstream(traces / "notes.txt") << "not a trace\n";
  const auto by_files = prefetchlab::testing::run_cli("trace-summary " + a.string() + " " + b.string());
  const auto by_folder = prefetchlab::testing::run_cli("trace-summary " + traces.string());
  ASSERT_EQ(by_folder.exit_code, 0) << by_folder.output;
  EXPECT_EQ(by_folder.output, by_files.output);
  const auto empty = dir.path() / "empty";
  std::filesystem::create_directories(empty);
  const auto none = prefetchlab::testing::run_cli("trace-summary " + empty.string());
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("is a folder without trace files"), std::string::npos) << none.output;
}

TEST(TraceImport, DeepSpeedHooksFromPythonFunctionEvents) {
  // with_stack=True: DeepSpeed's hooks as python_function frames (other frames are ignored).
  SyntheticTrace t(0, 1);
  t.step(1, 0, 1000);
  const std::string offload = "site-packages/deepspeed/runtime/zero/parameter_offload.py(353): _pre_forward_module_hook";
  t.cpu(offload, 10, 40, "python_function", {});
  t.cpu(offload, 100, 60, "python_function", {});
  t.cpu(offload, 200, 100, "python_function", {});
  t.cpu("site-packages/deepspeed/runtime/zero/partitioned_param_coordinator.py(270): fetch_sub_module", 12, 30,
        "python_function", {});
  t.cpu("torch/nn/modules/module.py(1780): _call_impl", 5, 500, "python_function", {});
  t.cpu("mytrainer.py(10): _pre_forward_module_hook", 5, 5, "python_function", {});  // not DeepSpeed's
  const pc::RankTimeline timeline = pc::build_rank_timeline(pc::read_trace_text(t.text(), "hooks.json"), 0, {});
  ASSERT_EQ(timeline.hook_calls.size(), 4u);
  pc::TraceSet set = pc::match_trace_set({timeline});
  const pc::TraceSummary summary = pc::summarize_traces(set);
  ASSERT_EQ(summary.steps[0].hooks.size(), 2u);
  EXPECT_EQ(summary.steps[0].hooks[0].function, "_pre_forward_module_hook");
  EXPECT_EQ(summary.steps[0].hooks[0].calls, 3);
  EXPECT_EQ(summary.steps[0].hooks[0].median_ns, 60'000);
  EXPECT_EQ(summary.steps[0].hooks[1].function, "fetch_sub_module");
  const std::string text = pc::format_trace_summary(set, summary);
  EXPECT_NE(text.find("hook _pre_forward_module_hook"), std::string::npos) << text;
}

// A collective of 2^62 elements (issue 45: calibrate went on and printed "sizes up to
// -9223372036854775808 B") is a damaged file: stopped where it is read, naming the key.
TEST(TraceImportBadInput, CollectiveSizeBeyondAnyDevice) {
  TempDir dir("trace-bad");
  SyntheticTrace t(0, 2);
  t.step(1, 1000, 1000);
  t.cpu("record_param_comms", 1060, 30, "cpu_op",
        {{"External id", 10}, {"Collective name", "_allgather_base"}, {"In msg nelems", std::int64_t{1} << 62},
         {"Out msg nelems", 200}, {"Group size", 2}, {"dtype", "BFloat16"}, {"Process Group Name", "0"}});
  const auto path = t.write(dir.path() / "huge.json");
  const std::string error = error_of({path.string()});
  EXPECT_NE(error.find("\"In msg nelems\" is 4611686018427387904, more than any device holds (at most 2^50 elements)"),
            std::string::npos)
      << error;
}

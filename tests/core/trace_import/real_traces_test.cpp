// The real traces in ../shared (public files, listed with their sources in
// shared/research/traces/SOURCES.md), summarised and checked against figures computed
// independently from their raw events (a separate Python pass over the JSON: per-kernel sort,
// launch correlation, interval union). Skipped with a message when ../shared is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/input/input_error.hpp"
#include "core/trace_import/trace_set.hpp"
#include "core/trace_import/trace_summary.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/shared_data.hpp"

namespace fs = std::filesystem;
namespace pc = prefetchlab::core;
using prefetchlab::testing::TempDir;

namespace {

const fs::path kShared = PREFETCHLAB_SOURCE_DIR "/../shared";
const fs::path kTraces = kShared / "research/traces";
const fs::path kDeepSpeed = kShared / "oracle/deepspeed-zero3-cpu";

#define SKIP_WITHOUT(path) PREFETCHLAB_REQUIRE_SHARED(path)

const pc::CollectiveKindSummary* kind_in(const pc::StepSummary& step, pc::CollectiveKind kind) {
  for (const auto& k : step.collectives) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

}  // namespace

// 8 ranks of one DLRM job (facebookresearch/param et_replay/tests/inputs/dlrm_kineto.tar.gz):
// the same collective ends within microseconds on every rank but starts up to 7.6 ms apart.
TEST(RealTraces, DlrmEightRanksTrueTimeAndSkew) {
  const fs::path tarball = kTraces / "param/dlrm_kineto.tar.gz";
  SKIP_WITHOUT(tarball);
  TempDir dir("dlrm");
  ASSERT_EQ(std::system(("tar -xzf " + tarball.string() + " -C " + dir.path().string()).c_str()), 0);
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 8u);
  const pc::TraceSet set = pc::load_trace_set(files, {});
  ASSERT_TRUE(set.cross_rank_times);
  ASSERT_EQ(set.ranks.size(), 8u);
  for (std::size_t r = 0; r < 8; ++r) EXPECT_EQ(set.ranks[r].rank, static_cast<std::int64_t>(r));
  ASSERT_EQ(set.matched.size(), 8u);  // 5 all_to_all (SendRecv kernels) + 3 all_reduce, in stream order
  // {index, kind, true us, start skew us}: min(end) - max(start) and max(start) - min(start).
  struct Expected {
    std::size_t index;
    pc::CollectiveKind kind;
    std::int64_t true_us, skew_us;
  };
  for (const Expected& e : {Expected{0, pc::CollectiveKind::kAllToAll, 9, 7624}, Expected{1, pc::CollectiveKind::kAllToAll, 6, 1101},
                            Expected{4, pc::CollectiveKind::kAllReduce, 82, 223}, Expected{7, pc::CollectiveKind::kAllReduce, 62, 885}}) {
    const pc::MatchedCollective& m = set.matched[e.index];
    EXPECT_EQ(m.kind, e.kind) << e.index;
    EXPECT_EQ(m.ranks.size(), 8u);
    EXPECT_EQ(m.true_ns, e.true_us * 1000) << e.index;
    EXPECT_EQ(m.skew_ns, e.skew_us * 1000) << e.index;
  }
  // The all_to_all's per-rank spans range 10 us - 7,635 us: the wait, not the transfer.
  EXPECT_EQ(set.matched[0].min_span_ns, 10'000);
  EXPECT_EQ(set.matched[0].max_span_ns, 7'635'000);
  const pc::TraceSummary summary = pc::summarize_traces(set);
  ASSERT_EQ(summary.steps.size(), 1u);
  EXPECT_EQ(summary.steps[0].number, 10);
  EXPECT_EQ(summary.steps[0].step_ns.min, 12'509'000);
  EXPECT_EQ(summary.steps[0].step_ns.max, 19'901'000);
}

// Rank 0 of a 2-rank DDP job on A100 (HolisticTraceAnalysis tests/data/nccl_parser_config):
// PyTorch 2.3-era metadata on the NCCL kernels.
TEST(RealTraces, A100DdpCollectiveSizes) {
  const fs::path file = kTraces / "HolisticTraceAnalysis/nccl_data.json.gz";
  SKIP_WITHOUT(file);
  const pc::TraceSet set = pc::load_trace_set({file.string()}, {});
  ASSERT_EQ(set.ranks.size(), 1u);
  EXPECT_FALSE(set.cross_rank_times);  // rank 0 of 2
  const pc::RankTimeline& rank = set.ranks[0];
  EXPECT_EQ(rank.world_size, 2);
  ASSERT_EQ(rank.steps.size(), 3u);
  EXPECT_EQ(rank.steps[0].number, 4);
  EXPECT_EQ(rank.steps[0].duration_ns, 222'442'191);
  EXPECT_EQ(rank.steps[1].duration_ns, 219'726'905);
  EXPECT_EQ(rank.steps[2].duration_ns, 224'936'243);
  // Each step: 5 all-reduces of these "In msg nelems" (float, group "0" of size 2), 2 broadcasts.
  for (int s = 0; s < 3; ++s) {
    std::multiset<std::int64_t> all_reduce, broadcast;
    for (const auto& c : rank.collectives) {
      if (c.step != s) continue;
      if (c.kind == pc::CollectiveKind::kAllReduce) {
        all_reduce.insert(c.in_nelems);
        EXPECT_EQ(c.out_nelems, c.in_nelems);
        EXPECT_EQ(c.dtype, "Float");
        EXPECT_EQ(c.process_group, "0");
        EXPECT_EQ(c.group_size, 2);
      }
      if (c.kind == pc::CollectiveKind::kBroadcast) broadcast.insert(c.in_nelems);
    }
    EXPECT_EQ(all_reduce, (std::multiset<std::int64_t>{2049000, 7875584, 6563840, 6637568, 2431040})) << s;
    EXPECT_EQ(broadcast, (std::multiset<std::int64_t>{53120, 53})) << s;
  }
  const pc::TraceSummary summary = pc::summarize_traces(set);
  const auto* ar = kind_in(summary.steps[0], pc::CollectiveKind::kAllReduce);
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->elements, 25'557'032);
  EXPECT_EQ(ar->host_calls, 5);  // c10d::allreduce_, issued from the autograd thread
  // Compute busy: the union of the non-NCCL kernels launched in the step (38,506.4 us).
  EXPECT_NEAR(static_cast<double>(rank.steps[0].compute_busy_ns), 38'506'395.5, 1'000.0);
  EXPECT_EQ(rank.autograd_thread, "thread 2919752 (pt_autograd_0)");
  EXPECT_EQ(rank.forward_backward_links, 543);
  std::int64_t autograd_calls = 0;
  for (const auto& call : rank.host_calls) autograd_calls += call.autograd_thread ? 1 : 0;
  EXPECT_EQ(autograd_calls, 15);  // DDP's gradient all-reduces run in backward
}

// Rank 1 of a 2-rank V100 job recorded with profile_memory (HolisticTraceAnalysis
// tests/data/df_index_resolver): the caching allocator's allocated curve.
TEST(RealTraces, MemoryProfiledPeakAllocated) {
  const fs::path file = kTraces / "HolisticTraceAnalysis/df_index_resolver.json.gz";
  SKIP_WITHOUT(file);
  const pc::TraceSet set = pc::load_trace_set({file.string()}, {});
  const pc::RankTimeline& rank = set.ranks[0];
  EXPECT_EQ(rank.rank, 1);
  EXPECT_EQ(rank.memory_events, 28'010);
  EXPECT_EQ(rank.gpu_memory_events, 26'770);
  ASSERT_EQ(rank.steps.size(), 5u);
  for (const auto& step : rank.steps) {
    EXPECT_EQ(step.peak_allocated_bytes, 6'629'508'096) << step.number;
    std::int64_t all_reduce = 0, sized = 0;
    for (const auto& c : rank.collectives) {
      if (c.step == static_cast<int>(&step - rank.steps.data()) && c.kind == pc::CollectiveKind::kAllReduce) {
        ++all_reduce;
        sized += c.elements >= 0 ? 1 : 0;
      }
    }
    EXPECT_EQ(all_reduce, 404);
    EXPECT_EQ(sized, 0);  // 2022: no metadata, no Input Dims
  }
  bool says_no_sizes = false;
  for (const auto& m : rank.missing) says_no_sizes = says_no_sizes || m.rfind("collective sizes", 0) == 0;
  EXPECT_TRUE(says_no_sizes);
}

// Single-GPU ResNet-18 on MI300X with with_stack (AMD-AGI/TraceLens): no ProfilerStep, so steps
// are cut at each optimizer zero_grad.
TEST(RealTraces, SingleGpuResNetStepsFromAMarker) {
  const fs::path file = kTraces / "TraceLens/train_resnet18.json.gz";
  SKIP_WITHOUT(file);
  pc::TimelineOptions options;
  options.step_marker = "Optimizer.zero_grad#SGD.zero_grad";
  const pc::TraceSet set = pc::load_trace_set({file.string()}, options);
  const pc::RankTimeline& rank = set.ranks[0];
  ASSERT_EQ(rank.steps.size(), 4u);
  EXPECT_TRUE(rank.collectives.empty());
  EXPECT_EQ(rank.autograd_thread, "thread 108 (pt_autograd_0)");
  EXPECT_EQ(rank.forward_backward_links, 355);
  EXPECT_EQ(rank.python_function_events, 6'649);
  EXPECT_EQ(rank.launch_links, 2'360);  // every kernel tied to its launch
  const double busy_us[] = {72'056.138, 72'354.059, 71'339.178, 71'708.023};
  for (std::size_t s = 0; s < 4; ++s) {
    EXPECT_NEAR(static_cast<double>(rank.steps[s].compute_busy_ns) / 1e3, busy_us[s], 1.0) << s;
  }
  EXPECT_EQ(rank.steps[0].peak_allocated_bytes, -1);  // host allocations only
  // Without the marker: no steps, a clear error.
  EXPECT_THROW(pc::load_trace_set({file.string()}, {}), pc::InputError);
}

// Real DeepSpeed ZeRO-3 on 2 CPU ranks over gloo (torch 1.13 legacy export, iteration 4 only):
// every configuration's all-gathers match one to one across the ranks.
TEST(RealTraces, DeepSpeedZero3GlooRanksMatch) {
  SKIP_WITHOUT(kDeepSpeed);
  struct Config {
    const char* folder;
    std::int64_t all_gathers;
  };
  for (const char* version : {"ds-0.14.5", "ds-0.19.6"}) {
    for (const Config& config : {Config{"default", 101}, Config{"pf0_reuse0", 200}, Config{"pf1e6_reuse0", 147}}) {
      const fs::path dir = kDeepSpeed / version / config.folder;
      pc::TimelineOptions options;
      options.whole_file_step = true;
      const pc::TraceSet set = pc::load_trace_set(
          {(dir / "torch_profiler_iter4_rank0.json.gz").string(), (dir / "torch_profiler_iter4_rank1.json.gz").string()}, options);
      EXPECT_FALSE(set.cross_rank_times);  // each rank's clock starts at its own profiler
      EXPECT_TRUE(set.notes.empty()) << set.notes.front();
      const pc::TraceSummary summary = pc::summarize_traces(set);
      ASSERT_EQ(summary.steps.size(), 1u);
      const auto* ag = kind_in(summary.steps[0], pc::CollectiveKind::kAllGather);
      ASSERT_NE(ag, nullptr);
      EXPECT_EQ(ag->count_min, config.all_gathers) << dir;
      EXPECT_EQ(ag->count_max, config.all_gathers) << dir;
      EXPECT_EQ(ag->matched, config.all_gathers) << dir;
      EXPECT_EQ(ag->host_calls, config.all_gathers) << dir;  // one c10d::allgather_ per gloo work item
      EXPECT_EQ(ag->true_ns, -1);
      const auto* ar = kind_in(summary.steps[0], pc::CollectiveKind::kAllReduce);
      ASSERT_NE(ar, nullptr);
      EXPECT_EQ(ar->count_max, 2);
    }
  }
}

TEST(RealTraces, CommandLineSummaryIsStable) {
  const fs::path file = kTraces / "HolisticTraceAnalysis/nccl_data.json.gz";
  SKIP_WITHOUT(file);
  const auto first = prefetchlab::testing::run_cli("trace-summary " + file.string());
  const auto second = prefetchlab::testing::run_cli("trace-summary " + file.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, second.output);
  EXPECT_NE(first.output.find("all_reduce      5        25557032"), std::string::npos) << first.output;
}

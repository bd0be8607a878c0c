// A failure on one rank ends the whole executor run with a message naming the rank and the
// operation, and nothing hangs (issue 7, "Done when" 5): an exception on the host, an error in
// a kernel, a collective that differs from the other ranks', and a rank stuck past the timeout.
// Each strikes in the middle of iteration 3 of 3, and the iterations every rank finished keep
// their rows: iteration 1 at least (the host synchronised with its end during iteration 2),
// iteration 2 when the devices had finished it, never the cut iteration 3.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/scenario/scenario.hpp"
#include "tests/gpu_backend/forwarding_device.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "gpu_backend/host/host_device.hpp"
#include "tests/support/sanitizer.hpp"

namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;
namespace pt = prefetchlab::testing;

namespace {

enum class Fault { kNone, kHostException, kKernelError, kCollectiveMismatch, kStuckRank };

// Rank 1's GEMMs and all-gathers in a clean run of the scenario below (counted by kNone).
struct Counts {
  int gemms = 0;
  int gathers = 0;
};
Counts& clean_counts() {
  static Counts counts;
  return counts;
}
constexpr int kIterations = 3;
// The collective timeout, and the bound on a failed run's wall time.
constexpr int kTimeoutMs = 300 * pt::kSanitizerSlowdown;
constexpr auto kEndsWithin = std::chrono::seconds(10 * pt::kSanitizerSlowdown);

// Rank 1 misbehaves at its GEMM (or all-gather) halfway through iteration 3.
class FaultyDevice : public pt::ForwardingDevice {
 public:
  FaultyDevice(pg::Device& inner, pg::DeviceGroup& group, Fault fault) : ForwardingDevice(inner), group_(group), fault_(fault) {}

  void gemm(pg::StreamId s, const pg::GemmArgs& args) override {
    if (rank() == 1) ++gemms_;
    if (fault_ == Fault::kNone && rank() == 1) clean_counts().gemms = gemms_;
    if (fault_ != Fault::kNone && rank() == 1 && gemms_ == clean_counts().gemms * 5 / (2 * kIterations)) {
      if (fault_ == Fault::kHostException) throw std::runtime_error("injected host fault");
      if (fault_ == Fault::kKernelError) {
        pg::GemmArgs bad = args;
        bad.type = pg::ElementType::kFP16;  // the host device's kernel rejects it when it runs
        ForwardingDevice::gemm(s, bad);
        return;
      }
      if (fault_ == Fault::kStuckRank) {
        // The host thread hangs (a dead data loader, a deadlock): it comes back only once the
        // group has given up on it.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!group_.failure() && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      }
    }
    ForwardingDevice::gemm(s, args);
  }
  void all_gather(pg::StreamId s, pg::DeviceSpan send, pg::DeviceSpan recv, pg::ElementType t) override {
    if (rank() == 1) ++gathers_;
    if (fault_ == Fault::kNone && rank() == 1) clean_counts().gathers = gathers_;
    if (fault_ == Fault::kCollectiveMismatch && rank() == 1 && gathers_ == clean_counts().gathers * 5 / (2 * kIterations)) {
      // A different bucket on one rank (what ranks that decide their bucket alone do).
      const std::uint64_t slot = send.bytes - 2;
      ForwardingDevice::all_gather(s, send.sub(0, slot), recv.sub(0, slot * static_cast<std::uint64_t>(world_size())), t);
      return;
    }
    ForwardingDevice::all_gather(s, send, recv, t);
  }

 private:
  pg::DeviceGroup& group_;
  Fault fault_;
  int gemms_ = 0;
  int gathers_ = 0;
};

struct Outcome {
  pg::ExecutorResult result;
  std::chrono::milliseconds elapsed;
};

Outcome run_with(Fault fault) {
  if (fault != Fault::kNone && clean_counts().gemms == 0) {
    const Outcome clean = run_with(Fault::kNone);
    if (clean.result.status != pc::RunStatus::kOk) ADD_FAILURE() << "the clean run failed: " << clean.result.message;
  }
  const pc::Scenario s = pc::load_scenario(
      std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-host.yaml",
      {"cluster.gpus_per_node=3", "training.iterations=" + std::to_string(kIterations), "output.trace=false"},
      pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  pg::HostDeviceOptions options;
  options.world_size = 3;
  options.capacity_bytes = 8ULL << 30;
  options.collective_timeout = std::chrono::milliseconds(kTimeoutMs);
  pg::HostDeviceGroup inner(options);
  pt::WrappingGroup<FaultyDevice> group(inner, [&](pg::Device& d) { return std::make_unique<FaultyDevice>(d, inner, fault); });
  const auto start = std::chrono::steady_clock::now();
  Outcome outcome{pg::Executor(s, group).run(), {}};
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  ::testing::Test::RecordProperty("message", outcome.result.message);
  return outcome;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The finished iterations' rows are kept (1 or 2 of them), the cut iteration 3's are not.
void expect_finished_iterations_kept(const Outcome& o) {
  const std::size_t kept = o.result.metrics.iterations.size();
  ASSERT_GE(kept, 1u) << o.result.message;
  ASSERT_LE(kept, 2u) << o.result.message;
  for (std::size_t i = 0; i < kept; ++i) EXPECT_EQ(o.result.metrics.iterations[i].iteration, static_cast<int>(i + 1));
  EXPECT_EQ(o.result.metrics.buckets.size(), 3 * kept);  // one per rank and iteration
  ASSERT_FALSE(o.result.metrics.samples.empty());
  for (const auto& sample : o.result.metrics.samples) EXPECT_LE(sample.iteration, static_cast<int>(kept));
}

}  // namespace

TEST(ExecutorFailure, AnExceptionOnOneRankEndsTheRunNamingRankAndModule) {
  const Outcome o = run_with(Fault::kHostException);
  EXPECT_EQ(o.result.status, pc::RunStatus::kError);
  ASSERT_TRUE(o.result.failure);
  EXPECT_EQ(o.result.failure->rank, 1);
  EXPECT_TRUE(contains(o.result.message, "rank 1")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "injected host fault")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "compute of module ")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "in iteration 3")) << o.result.message;
  EXPECT_LT(o.elapsed, kEndsWithin);
  expect_finished_iterations_kept(o);
}

TEST(ExecutorFailure, AKernelErrorEndsTheRunNamingRankStreamAndKernel) {
  const Outcome o = run_with(Fault::kKernelError);
  EXPECT_EQ(o.result.status, pc::RunStatus::kError);
  ASSERT_TRUE(o.result.failure);
  EXPECT_EQ(o.result.failure->rank, 1);
  EXPECT_TRUE(contains(o.result.message, "gemm")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "on stream compute")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "fp16")) << o.result.message;
  EXPECT_LT(o.elapsed, kEndsWithin);
  expect_finished_iterations_kept(o);
}

TEST(ExecutorFailure, ACollectiveMismatchEndsTheRunNamingTheOddRank) {
  const Outcome o = run_with(Fault::kCollectiveMismatch);
  EXPECT_EQ(o.result.status, pc::RunStatus::kCollectiveMismatch);
  ASSERT_TRUE(o.result.failure);
  EXPECT_EQ(o.result.failure->rank, 1);
  EXPECT_EQ(o.result.failure->kind, pg::FailureKind::kCollectiveMismatch);
  EXPECT_TRUE(contains(o.result.message, "collective mismatch")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "all_gather #")) << o.result.message;
  EXPECT_LT(o.elapsed, kEndsWithin);
  expect_finished_iterations_kept(o);
}

TEST(ExecutorFailure, AStuckRankIsNamedAfterTheTimeoutAndNothingHangs) {
  const Outcome o = run_with(Fault::kStuckRank);
  EXPECT_EQ(o.result.status, pc::RunStatus::kCollectiveMismatch);
  ASSERT_TRUE(o.result.failure);
  EXPECT_EQ(o.result.failure->rank, 1);
  EXPECT_EQ(o.result.failure->kind, pg::FailureKind::kTimeout);
  EXPECT_TRUE(contains(o.result.message, "did not reach the collective")) << o.result.message;
  EXPECT_TRUE(contains(o.result.message, "within " + std::to_string(kTimeoutMs) + " ms")) << o.result.message;
  EXPECT_LT(o.elapsed, kEndsWithin);
  expect_finished_iterations_kept(o);
}

// core::ControllerDriver: when each executor hands a controller what (the contract of
// core/control/prefetch_controller.hpp), checked on a controller that logs every call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/control/controller_driver.hpp"

namespace pc = prefetchlab::core;

namespace {

// Logs each call into `log`. Batch or per-fetch; wants samples on even iterations; proposes at
// iteration 3 (agreement MAX); a per-fetch one answers each sample with a bucket of its wait.
class LoggingController final : public pc::PrefetchController {
 public:
  LoggingController(const pc::ControllerContext& context, bool per_fetch, std::vector<std::string>& log)
      : PrefetchController(pc::ControllerConfig{}, context), per_fetch_(per_fetch), log_(log) {}
  pc::Agreement agreement() const override { return pc::Agreement::kAllReduceMax; }
  bool decides_per_fetch() const override { return per_fetch_; }
  std::optional<pc::Proposal> begin_iteration(int iteration, pc::TraceMode) override {
    iteration_ = iteration;
    log_.push_back("begin " + std::to_string(iteration));
    if (iteration == 3) return pc::Proposal{false, {static_cast<double>(context().rank)}};
    return std::nullopt;
  }
  void apply(const pc::Proposal& agreed) override {
    log_.push_back("apply " + std::to_string(static_cast<int>(agreed.values.at(0))));
  }
  bool wants_samples() const override { return iteration_ % 2 == 0; }
  void on_trace_invalidated() override { log_.push_back("invalidated"); }

 protected:
  std::optional<std::int64_t> on_sample(const pc::TimingSample& sample) override {
    const std::int64_t host_wait_ns = column(sample, bound_index("host_wait_ns"));
    log_.push_back("sample " + std::to_string(sample.iteration) + " wait " + std::to_string(host_wait_ns));
    if (per_fetch_) return 1000 + host_wait_ns;
    return std::nullopt;
  }

 private:
  bool per_fetch_;
  std::vector<std::string>& log_;
  int iteration_ = 0;
};

pc::ControllerContext context(int rank, int world) {
  pc::ControllerContext c;
  c.rank = rank;
  c.world_size = world;
  return c;
}

// Forward fetches whose host wait (end - start) is 10 * (index + 1).
std::vector<pc::FetchTiming> fetches(int n) {
  std::vector<pc::FetchTiming> out;
  for (int i = 0; i < n; ++i) {
    pc::FetchTiming t;
    t.host_start_ns = 1000 * i;
    t.host_end_ns = 1000 * i + 10 * (i + 1);
    out.push_back(t);
  }
  return out;
}

TEST(ControllerDriver, ABatchPolicyGetsAnIterationsSamplesAtTheNextResetStepWithItsInvalidations) {
  std::vector<std::string> log;
  const pc::ControllerContext ctx = context(0, 1);
  pc::ControllerDriver driver(std::make_unique<LoggingController>(ctx, false, log), ctx);
  const std::vector<pc::FetchTiming> three = fetches(3);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(driver.previous_samples_due(i), i == 3) << i;  // iteration 2 wanted its samples
    if (driver.previous_samples_due(i)) driver.deliver_previous(i, three);
    EXPECT_FALSE(driver.propose(i, pc::TraceMode::kComplete).has_value());  // one rank: applied here
    driver.start_fetches();
    EXPECT_EQ(driver.samples_wanted(), i % 2 == 0);
    EXPECT_FALSE(driver.reads_fetch_timings());  // a batch policy reads none per fetch
    // Fetch 1 invalidates the trace in every iteration.
    for (std::size_t f = 0; f < 3; ++f) EXPECT_FALSE(driver.after_fetch(i, f, {}, f == 1).has_value());
  }
  // Iterations 1 and 3 did not want samples: their invalidations go at once. Iteration 2's goes
  // with its samples, right after fetch 1's (the first fetch of a phase gives no sample).
  const std::vector<std::string> expected{"begin 1", "invalidated", "begin 2", "sample 2 wait 20", "invalidated",
                                          "sample 2 wait 30", "begin 3", "apply 0", "invalidated"};
  EXPECT_EQ(log, expected);
}

TEST(ControllerDriver, APerFetchPolicySeesEachHostSampleAsItsFetchEnds) {
  std::vector<std::string> log;
  const pc::ControllerContext ctx = context(0, 1);
  pc::ControllerDriver driver(std::make_unique<LoggingController>(ctx, true, log), ctx);
  driver.propose(1, pc::TraceMode::kComplete);
  driver.start_fetches();
  EXPECT_FALSE(driver.reads_fetch_timings());  // iteration 1 wants no samples
  driver.propose(2, pc::TraceMode::kComplete);
  driver.start_fetches();
  ASSERT_TRUE(driver.reads_fetch_timings());
  const std::vector<pc::FetchTiming> all = fetches(2);
  // The first fetch of its phase gives no sample; the second does, and its bucket comes back.
  EXPECT_FALSE(driver.after_fetch(2, 0, std::span(all).first(1), false).has_value());
  EXPECT_EQ(driver.after_fetch(2, 1, all, true), std::optional<std::int64_t>(1020));
  EXPECT_FALSE(driver.previous_samples_due(3));  // nothing left for reset_step
  const std::vector<std::string> expected{"begin 1", "begin 2", "sample 2 wait 20", "invalidated"};
  EXPECT_EQ(log, expected);
}

TEST(ControllerDriver, AProposalIsLeftToTheExecutorToAgreeOnOnlyWithOtherRanks) {
  std::vector<std::string> log;
  const pc::ControllerContext ctx = context(1, 2);
  pc::ControllerDriver driver(std::make_unique<LoggingController>(ctx, false, log), ctx);
  for (int i = 1; i <= 2; ++i) EXPECT_FALSE(driver.propose(i, pc::TraceMode::kComplete).has_value());
  const auto proposal = driver.propose(3, pc::TraceMode::kComplete);
  ASSERT_TRUE(proposal.has_value());
  EXPECT_EQ(proposal->values, std::vector<double>{1.0});
  EXPECT_EQ(driver.agreement(), pc::Agreement::kAllReduceMax);
  EXPECT_EQ(log.back(), "begin 3");  // not applied yet
  driver.apply_agreed(pc::Proposal{false, {7.0}});
  EXPECT_EQ(log.back(), "apply 7");
}

}  // namespace

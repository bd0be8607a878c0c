// The prefetch controllers pinned to their rules: ema_threshold (0z5a/DeepSpeed commit 6e70233
// and its four defect switches), deepspeed_pr8431's EMAs and cadence (deepspeedai/DeepSpeed
// PR #8431), agreement, and pace_search. Controllers are driven as core/control/prefetch_controller.hpp's executor contract
// says.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "core/control/prefetch_controller.hpp"
#include "tests/support/input_error_testing.hpp"

namespace pc = prefetchlab::core;

namespace {

pc::ControllerConfig ema_config() {
  pc::ControllerConfig c;
  c.policy = pc::ControllerPolicy::kEmaThreshold;
  return c;
}

pc::ControllerContext context(std::int64_t initial = 50'000'000, std::int64_t max_live = 1'000'000'000,
                              int rank = 0, int world = 1) {
  pc::ControllerContext ctx;
  ctx.initial_bucket_numel = initial;
  ctx.max_live_numel = max_live;
  ctx.rank = rank;
  ctx.world_size = world;
  return ctx;
}

pc::TimingSample sample(int iteration, pc::Phase phase, std::int64_t wait, std::int64_t interval,
                        std::vector<std::int64_t> extra = {}) {
  pc::TimingSample s;
  s.iteration = iteration;
  s.phase = phase;
  s.wait_ns = wait;
  s.interval_ns = interval;
  s.extra = std::move(extra);
  return s;
}

// What one iteration of one rank delivers: (phase, wait, interval) triples.
using Samples = std::vector<pc::TimingSample>;
// Per iteration samples; an iteration absent from the map delivers the default.
using Script = std::function<Samples(int iteration, int rank)>;

// Runs `world` controllers through iterations 1..n as the executor contract says and returns
// the bucket each rank has at each iteration's first fetch. Modes: RECORD on iteration 1 and on
// any iteration in `record`, else COMPLETE. `invalidate` lists (iteration) where every rank's
// trace is invalidated after its samples.
std::map<int, std::vector<std::int64_t>> drive(const pc::ControllerConfig& config, std::int64_t initial,
                                               int n, const Script& script, int world = 1,
                                               std::set<int> record = {}, std::set<int> invalidate = {},
                                               std::int64_t max_live = 1'000'000'000) {
  std::vector<std::unique_ptr<pc::PrefetchController>> ranks;
  const std::vector<std::string> columns{"host_wait_ns", "host_interval_ns"};
  for (int r = 0; r < world; ++r) {
    ranks.push_back(pc::make_prefetch_controller(config, context(initial, max_live, r, world)));
    ranks.back()->bind_columns(columns);
  }
  std::map<int, std::vector<std::int64_t>> buckets;
  for (int i = 1; i <= n; ++i) {
    const pc::TraceMode mode = (i == 1 || record.contains(i)) ? pc::TraceMode::kRecord : pc::TraceMode::kComplete;
    std::vector<pc::Proposal> proposals;
    for (auto& c : ranks) {
      auto p = c->begin_iteration(i, mode);
      if (p) proposals.push_back(*p);
    }
    EXPECT_TRUE(proposals.empty() || proposals.size() == ranks.size());
    if (!proposals.empty()) {
      for (int r = 0; r < world; ++r) ranks[static_cast<std::size_t>(r)]->apply(pc::agree(ranks[0]->agreement(), proposals, r));
    }
    for (auto& c : ranks) buckets[i].push_back(c->bucket_numel());
    for (int r = 0; r < world; ++r) {
      auto& c = *ranks[static_cast<std::size_t>(r)];
      if (c.wants_samples()) {
        for (auto s : script(i, r)) {
          s.rank = r;
          c.observe(s);
        }
      }
      if (invalidate.contains(i)) c.on_trace_invalidated();
    }
  }
  return buckets;
}

Script constant_ratio(double forward, double backward = -1) {
  return [=](int i, int) {
    Samples s;
    for (int k = 0; k < 5; ++k) {
      s.push_back(sample(i, pc::Phase::kForward, static_cast<std::int64_t>(forward * 1000), 1000));
      if (backward >= 0) s.push_back(sample(i, pc::Phase::kBackward, static_cast<std::int64_t>(backward * 1000), 1000));
    }
    return s;
  };
}

}  // namespace

// ------------------------------------------------------------------------------ agreement

TEST(Agreement, AllReduceMaxIsElementwiseMaxAndAnyInvalid) {
  const std::vector<pc::Proposal> p{{false, {0.1, 5}}, {true, {0.3, 2}}, {false, {0.2, 9}}};
  EXPECT_EQ(pc::agree(pc::Agreement::kAllReduceMax, p, 2), (pc::Proposal{true, {0.3, 9}}));
  EXPECT_EQ(pc::agree(pc::Agreement::kBroadcastRank0, p, 2), p[0]);
  EXPECT_EQ(pc::agree(pc::Agreement::kNone, p, 1), p[1]);
  EXPECT_THROW(pc::agree(pc::Agreement::kNone, p, 3), std::invalid_argument);
  const std::vector<pc::Proposal> ragged{{false, {1}}, {false, {1, 2}}};
  EXPECT_THROW(pc::agree(pc::Agreement::kAllReduceMax, ragged, 0), std::invalid_argument);
}

TEST(Agreement, StaticNeverProposesNorWantsSamples) {
  pc::ControllerConfig config;
  const auto b = drive(config, 12345, 30, constant_ratio(0.9));
  for (const auto& [i, v] : b) EXPECT_EQ(v[0], 12345) << i;
}

// -------------------------------------------------------------------------- ema_threshold

TEST(EmaThreshold, ConstantRatioGrowsOnTheUpdateCadenceUpToTheCap) {
  const auto b = drive(ema_config(), 50'000'000, 121, constant_ratio(0.3));
  EXPECT_EQ(b.at(1)[0], 50'000'000);
  EXPECT_EQ(b.at(10)[0], 50'000'000);  // sampled, not yet updated
  EXPECT_EQ(b.at(11)[0], 62'500'000);  // update at the start of 11
  EXPECT_EQ(b.at(20)[0], 62'500'000);
  EXPECT_EQ(b.at(21)[0], 78'125'000);
  EXPECT_EQ(b.at(31)[0], 97'656'250);
  EXPECT_EQ(b.at(41)[0], 122'070'312);  // int() truncates
  EXPECT_EQ(b.at(101)[0], 465'661'282);
  EXPECT_EQ(b.at(111)[0], 500'000'000);  // clamped to max_bucket_numel
  EXPECT_EQ(b.at(121)[0], 500'000'000);
}

TEST(EmaThreshold, GrowthIsAtLeastOneAndMaxLiveCapsTheBounds) {
  auto config = ema_config();
  config.min_bucket_numel = 1;
  config.update_interval = 1;
  // From 2: int(2 * 1.25) = 2, so growth is max(old + 1, ...) = 3, then 4, 5 and 6 = int(5 * 1.25).
  const auto b = drive(config, 2, 6, constant_ratio(0.5));
  EXPECT_EQ(b.at(2)[0], 2);  // iteration 1 records: no samples, update at 2 skipped
  EXPECT_EQ(b.at(3)[0], 3);
  EXPECT_EQ(b.at(4)[0], 4);
  EXPECT_EQ(b.at(5)[0], 5);
  EXPECT_EQ(b.at(6)[0], 6);
  // max' = min(max, max_live): the cap is max_live when smaller, also for the start.
  const auto capped = drive(ema_config(), 900'000'000, 31, constant_ratio(0.3), 1, {}, {}, 100'000'000);
  EXPECT_EQ(capped.at(1)[0], 100'000'000);
  EXPECT_EQ(capped.at(31)[0], 100'000'000);
}

TEST(EmaThreshold, ShrinksBelowTheLowThresholdAndKeepsTheDeadBand) {
  const auto shrink = drive(ema_config(), 50'000'000, 21, constant_ratio(0.01));
  EXPECT_EQ(shrink.at(11)[0], 45'000'000);
  EXPECT_EQ(shrink.at(21)[0], 40'500'000);
  const auto dead = drive(ema_config(), 50'000'000, 61, constant_ratio(0.1));
  for (const auto& [i, v] : dead) EXPECT_EQ(v[0], 50'000'000) << i;
}

TEST(EmaThreshold, RatioIsTheMaximumOverPhasesOfSumWaitOverSumInterval) {
  // Forward alone would shrink (0.01); backward stalls 0.3 of its time but is a small share of
  // the whole (a pooled ratio would be < 0.05); the per-phase maximum grows.
  const Script script = [](int i, int) {
    Samples s;
    for (int k = 0; k < 10; ++k) s.push_back(sample(i, pc::Phase::kForward, 100, 10'000));
    s.push_back(sample(i, pc::Phase::kBackward, 300, 1000));
    s.push_back(sample(i, pc::Phase::kBackward, 0, 0));  // a zero interval adds nothing
    return s;
  };
  const auto b = drive(ema_config(), 50'000'000, 11, script);
  EXPECT_EQ(b.at(11)[0], 62'500'000);
  // Sums, not a mean of per-sample ratios: 90/100 and 0/10000 average 0.45 (grow), but
  // sum(wait)/sum(interval) = 90/10100 = 0.009 (shrink).
  const Script sums = [](int i, int) {
    return Samples{sample(i, pc::Phase::kForward, 90, 100), sample(i, pc::Phase::kForward, 0, 10'000)};
  };
  EXPECT_EQ(drive(ema_config(), 50'000'000, 11, sums).at(11)[0], 45'000'000);
}

TEST(EmaThreshold, EmaCarriesBetweenUpdates) {
  // Ratio 1.0 on iteration 10 (ema 1.0, grow), then 0.1: ema = 0.1*0.1 + 0.9*1.0 = 0.91, grow.
  const Script script = [](int i, int) {
    const std::int64_t wait = i <= 10 ? 1000 : 100;
    return Samples{sample(i, pc::Phase::kForward, wait, 1000)};
  };
  const auto b = drive(ema_config(), 50'000'000, 21, script);
  EXPECT_EQ(b.at(11)[0], 62'500'000);
  EXPECT_EQ(b.at(21)[0], 78'125'000);
}

TEST(EmaThreshold, AnInvalidRankMakesEveryRankSkipAndResetWithAllReduceMax) {
  // Ratio 1.0 on iteration 10 (both grow, ema 1.0); on 20 rank 1 has no sample: skip + reset;
  // on 30 ratio 0.1: a fresh EMA is 0.1 (dead band), a carried one would be 0.91 (grow).
  const Script script = [](int i, int rank) {
    if (i == 20 && rank == 1) return Samples{};
    const std::int64_t wait = i <= 10 ? 1000 : (i <= 20 ? 300 : 100);
    return Samples{sample(i, pc::Phase::kForward, wait, 1000)};
  };
  const auto b = drive(ema_config(), 50'000'000, 31, script, 2);
  EXPECT_EQ(b.at(11), (std::vector<std::int64_t>{62'500'000, 62'500'000}));
  EXPECT_EQ(b.at(21), (std::vector<std::int64_t>{62'500'000, 62'500'000}));  // skipped
  EXPECT_EQ(b.at(31), (std::vector<std::int64_t>{62'500'000, 62'500'000}));  // reset: 0.1, dead band

  // agreement: none — only rank 1 skips (and resets); rank 0 grows on 0.3.
  auto none = ema_config();
  none.agreement = pc::Agreement::kNone;
  const auto n = drive(none, 50'000'000, 31, script, 2);
  EXPECT_EQ(n.at(21), (std::vector<std::int64_t>{78'125'000, 62'500'000}));
  // rank 0: ema 0.1*0.1 + 0.9*(0.1*0.3 + 0.9*1.0) = 0.847 -> grow; rank 1: fresh 0.1 -> unchanged.
  EXPECT_EQ(n.at(31), (std::vector<std::int64_t>{97'656'250, 62'500'000}));

  // agreement: broadcast_rank0 — rank 0's view counts, rank 1's missing sample does not.
  auto bcast = ema_config();
  bcast.agreement = pc::Agreement::kBroadcastRank0;
  const auto r0 = drive(bcast, 50'000'000, 21, script, 2);
  EXPECT_EQ(r0.at(21), (std::vector<std::int64_t>{78'125'000, 78'125'000}));
}

TEST(EmaThreshold, AllReduceMaxTakesTheWorstRanksRatio) {
  const Script script = [](int i, int rank) {
    return Samples{sample(i, pc::Phase::kForward, rank == 0 ? 10 : 300, 1000)};
  };
  const auto b = drive(ema_config(), 50'000'000, 11, script, 2);
  EXPECT_EQ(b.at(11), (std::vector<std::int64_t>{62'500'000, 62'500'000}));
  auto none = ema_config();
  none.agreement = pc::Agreement::kNone;
  EXPECT_EQ(drive(none, 50'000'000, 11, script, 2).at(11), (std::vector<std::int64_t>{45'000'000, 62'500'000}));
}

TEST(EmaThreshold, ClampInitialOnAndOff) {
  // Start 5e6 is below min 1e7. Fixed: clamped at construction. Defect (d): it stays outside
  // as long as the ratio sits in the dead band; a resize clamps it.
  EXPECT_EQ(drive(ema_config(), 5'000'000, 1, constant_ratio(0.1)).at(1)[0], 10'000'000);
  auto off = ema_config();
  off.clamp_initial = false;
  const auto dead = drive(off, 5'000'000, 31, constant_ratio(0.1));
  EXPECT_EQ(dead.at(31)[0], 5'000'000);
  const auto shrink = drive(off, 5'000'000, 11, constant_ratio(0.0));
  EXPECT_EQ(shrink.at(11)[0], 10'000'000);  // int(5e6 * 0.9) clamped up to min
  const auto above = drive(off, 900'000'000, 11, constant_ratio(0.1));
  EXPECT_EQ(above.at(11)[0], 900'000'000);
}

TEST(EmaThreshold, RecordingIterationCountsOnlyWithSampleDuringRecord) {
  auto config = ema_config();
  config.update_interval = 1;
  // Iteration 1 records (no prefetch: big stalls); later iterations stall 0.1 (dead band).
  const Script script = [](int i, int) { return Samples{sample(i, pc::Phase::kForward, i == 1 ? 800 : 100, 1000)}; };
  const auto fixed = drive(config, 50'000'000, 3, script);
  EXPECT_EQ(fixed.at(2)[0], 50'000'000);  // iteration 1 is invalid: skipped
  EXPECT_EQ(fixed.at(3)[0], 50'000'000);  // fresh EMA 0.1: dead band
  config.sample_during_record = true;
  const auto defect = drive(config, 50'000'000, 3, script);
  EXPECT_EQ(defect.at(2)[0], 62'500'000);  // grew before any prefetch ran (defect c)
  EXPECT_EQ(defect.at(3)[0], 78'125'000);  // ema 0.1*0.1 + 0.9*0.8 = 0.73
  // A re-recording iteration after an invalidation counts the same way.
  auto rerecord = ema_config();
  EXPECT_EQ(drive(rerecord, 50'000'000, 11, constant_ratio(0.3), 1, {10}).at(11)[0], 50'000'000);
  rerecord.sample_during_record = true;
  EXPECT_EQ(drive(rerecord, 50'000'000, 11, constant_ratio(0.3), 1, {10}).at(11)[0], 62'500'000);
}

TEST(EmaThreshold, TraceInvalidationSkipsTheNextUpdateAndResetsTheEma) {
  // Ratio 1.0 until 10 (grow at 11, ema 1.0); invalidated on 15 (not a sampled iteration):
  // the update at 21 is skipped although iteration 20 stalled 0.3, and the EMA restarts, so
  // 0.1 on iteration 30 is the dead band (a carried EMA would grow).
  const Script script = [](int i, int) {
    const std::int64_t wait = i <= 10 ? 1000 : (i <= 20 ? 300 : 100);
    return Samples{sample(i, pc::Phase::kForward, wait, 1000)};
  };
  const auto b = drive(ema_config(), 50'000'000, 31, script, 1, {}, {15});
  EXPECT_EQ(b.at(11)[0], 62'500'000);
  EXPECT_EQ(b.at(21)[0], 62'500'000);
  EXPECT_EQ(b.at(31)[0], 62'500'000);
  const auto kept = drive(ema_config(), 50'000'000, 31, script);
  EXPECT_EQ(kept.at(21)[0], 78'125'000);
  EXPECT_EQ(kept.at(31)[0], 97'656'250);
}

TEST(EmaThreshold, WantsSamplesOnlyOnSampledCompleteIterations) {
  auto c = pc::make_prefetch_controller(ema_config(), context());
  for (int i = 1; i <= 20; ++i) {
    c->begin_iteration(i, i == 1 ? pc::TraceMode::kRecord : pc::TraceMode::kComplete);
    EXPECT_EQ(c->wants_samples(), i % 10 == 0) << i;
  }
}

TEST(EmaThreshold, HostTimersReadTheHostColumns) {
  auto config = ema_config();
  config.timing = pc::TimingSource::kHostTimers;
  auto c = pc::make_prefetch_controller(config, context());
  EXPECT_THROW(c->bind_columns(std::vector<std::string>{"host_wait_ns"}), pc::MissingSampleColumn);
  // Defect (b): the device stalled 50 % but the host saw 0.01 -> the bucket shrinks.
  const Script script = [](int i, int) {
    return Samples{sample(i, pc::Phase::kForward, 500, 1000, {/*host_wait_ns*/ 10, /*host_interval_ns*/ 1000})};
  };
  EXPECT_EQ(drive(config, 50'000'000, 11, script).at(11)[0], 45'000'000);
  EXPECT_EQ(drive(ema_config(), 50'000'000, 11, script).at(11)[0], 62'500'000);
}

// ------------------------------------------------------------------------ deepspeed_pr8431

namespace {
pc::ControllerConfig pr_config() {
  pc::ControllerConfig c;
  c.policy = pc::ControllerPolicy::kDeepSpeedPr8431;
  c.agreement = pc::Agreement::kNone;
  c.timing = pc::TimingSource::kHostTimers;
  c.sample_during_record = true;
  c.clamp_initial = false;
  return c;
}
pc::TimingSample host(std::int64_t wait, std::int64_t interval) {
  // Device columns deliberately contradict the host ones: pr8431 must read the host timers.
  return sample(1, pc::Phase::kForward, 999'999, 1, {wait, interval});  // kHostColumns order
}
const std::vector<std::string> kHostColumns{"host_wait_ns", "host_interval_ns"};
}  // namespace

TEST(Pr8431, DecidesEveryTenthSampleFromHostTimerEmas) {
  auto c = pc::make_prefetch_controller(pr_config(), context());
  c->bind_columns(kHostColumns);
  EXPECT_TRUE(c->decides_per_fetch());
  EXPECT_FALSE(c->begin_iteration(1, pc::TraceMode::kRecord).has_value());
  EXPECT_TRUE(c->wants_samples());  // every trace mode, recording included
  for (int k = 1; k <= 9; ++k) EXPECT_FALSE(c->observe(host(0, 100)).has_value()) << k;
  EXPECT_EQ(c->observe(host(0, 100)), std::optional<std::int64_t>(45'000'000));  // ratio 0 -> x0.9
  EXPECT_EQ(c->bucket_numel(), 45'000'000);
  for (int k = 1; k <= 9; ++k) EXPECT_FALSE(c->observe(host(50, 100)).has_value());
  // wait EMA after 10 samples of 50 from 0: 50 * (1 - 0.9^10) = 32.6; ratio 0.326 -> x1.25.
  EXPECT_EQ(c->observe(host(50, 100)), std::optional<std::int64_t>(56'250'000));
}

TEST(Pr8431, EachEmaStartsAtItsFirstSample) {
  // First sample wait 50, then nine of 0 (interval 100 throughout): started at the first sample
  // the wait EMA is 50 * 0.9^9 = 19.4 (ratio 0.194 -> grow); started at 0 it would be
  // 0.1 * 50 * 0.9^9 = 1.9 (shrink).
  auto c = pc::make_prefetch_controller(pr_config(), context());
  c->bind_columns(kHostColumns);
  c->begin_iteration(1, pc::TraceMode::kRecord);
  c->observe(host(50, 100));
  for (int k = 1; k <= 8; ++k) c->observe(host(0, 100));
  EXPECT_EQ(c->observe(host(0, 100)), std::optional<std::int64_t>(62'500'000));
}

TEST(Pr8431, ClampsOnlyWhenAChangeHappens) {
  // Start 5e6, below min 1e7: the dead band keeps it (no clamp); a shrink clamps up to 1e7.
  auto c = pc::make_prefetch_controller(pr_config(), context(5'000'000));
  c->bind_columns(kHostColumns);
  c->begin_iteration(1, pc::TraceMode::kRecord);
  EXPECT_EQ(c->bucket_numel(), 5'000'000);
  for (int k = 1; k <= 10; ++k) c->observe(host(10, 100));  // 0.1: dead band
  EXPECT_EQ(c->bucket_numel(), 5'000'000);
  auto d = pc::make_prefetch_controller(pr_config(), context(5'000'000));
  d->bind_columns(kHostColumns);
  d->begin_iteration(1, pc::TraceMode::kRecord);
  for (int k = 1; k <= 9; ++k) d->observe(host(0, 100));
  EXPECT_EQ(d->observe(host(0, 100)), std::optional<std::int64_t>(10'000'000));
  // Never capped by max_live, and the cadence runs across iterations.
  auto e = pc::make_prefetch_controller(pr_config(), context(480'000'000, 100'000'000));
  e->bind_columns(kHostColumns);
  e->begin_iteration(1, pc::TraceMode::kRecord);
  for (int k = 1; k <= 5; ++k) e->observe(host(90, 100));
  e->begin_iteration(2, pc::TraceMode::kComplete);
  for (int k = 1; k <= 4; ++k) e->observe(host(90, 100));
  EXPECT_EQ(e->observe(host(90, 100)), std::optional<std::int64_t>(500'000'000));
}

TEST(Pr8431, NeedsTheHostTimerColumns) {
  auto c = pc::make_prefetch_controller(pr_config(), context());
  try {
    c->bind_columns(std::vector<std::string>{});
    FAIL() << "expected MissingSampleColumn";
  } catch (const pc::MissingSampleColumn& e) {
    EXPECT_EQ(e.column(), "host_wait_ns");
  }
}

// ---------------------------------------------------------------------------- pace_search

namespace {
pc::ControllerConfig pace_config() {
  pc::ControllerConfig c;
  c.policy = pc::ControllerPolicy::kPaceSearch;
  c.min_bucket_numel = pc::kPaceSearchDefaultMinBucketNumel;
  c.agreement = pc::Agreement::kAllReduceMax;
  return c;
}
}  // namespace

TEST(PaceSearch, BracketsDownRefinesAndHolds) {
  const double best = 4e6;
  std::unique_ptr<pc::PrefetchController> c = pc::make_prefetch_controller(pace_config(), context());
  std::map<int, std::int64_t> bucket;
  int proposals = 0;
  for (int i = 1; i <= 12; ++i) {
    auto p = c->begin_iteration(i, i == 1 ? pc::TraceMode::kRecord : pc::TraceMode::kComplete);
    if (p) {
      ++proposals;
      c->apply(pc::agree(c->agreement(), std::vector<pc::Proposal>{*p}, 0));
    }
    bucket[i] = c->bucket_numel();
    if (!c->wants_samples()) continue;
    const double x = std::log2(static_cast<double>(bucket[i]) / best);
    const auto pace = static_cast<std::int64_t>(1e6 * (1 + x * x));
    c->observe(sample(i, pc::Phase::kForward, 0, pace / 2));
    c->observe(sample(i, pc::Phase::kBackward, 0, pace - pace / 2));
  }
  EXPECT_EQ(bucket[1], 50'000'000);
  EXPECT_EQ(bucket[2], 50'000'000);   // first complete iteration measures the start
  EXPECT_EQ(bucket[3], 12'500'000);   // x1/4
  EXPECT_EQ(bucket[4], 3'125'000);    // better: on down
  EXPECT_EQ(bucket[5], 781'250);      // worse: bracket closed
  EXPECT_EQ(bucket[6], 1'562'500);    // refine x1/2 (worse)
  EXPECT_EQ(bucket[7], 6'250'000);    // refine x2 (worse than 3.125e6: log distance 0.64 > 0.36)
  for (int i = 8; i <= 12; ++i) EXPECT_EQ(bucket[i], 3'125'000) << i;
  EXPECT_EQ(proposals, 7);            // iterations 2..8 (2 reports the recording); none once held
  EXPECT_FALSE(c->wants_samples());
}

TEST(PaceSearch, BracketsUpWhenTheFirstStepDownLoses) {
  const double best = 3e8;
  auto c = pc::make_prefetch_controller(pace_config(), context());
  std::map<int, std::int64_t> bucket;
  for (int i = 1; i <= 10; ++i) {
    auto p = c->begin_iteration(i, i == 1 ? pc::TraceMode::kRecord : pc::TraceMode::kComplete);
    if (p) c->apply(*p);
    bucket[i] = c->bucket_numel();
    if (!c->wants_samples()) continue;
    const double x = std::log2(static_cast<double>(bucket[i]) / best);
    c->observe(sample(i, pc::Phase::kForward, 0, static_cast<std::int64_t>(1e6 * (1 + x * x))));
  }
  EXPECT_EQ(bucket[3], 12'500'000);   // down first: worse
  EXPECT_EQ(bucket[4], 200'000'000);  // then up from the start
  EXPECT_EQ(bucket[5], 500'000'000);  // x4 clamped to max_bucket_numel
  EXPECT_EQ(bucket[6], 100'000'000);  // refine around 2e8 (5e8 is farther from 3e8 in log)
  EXPECT_EQ(bucket[7], 400'000'000);
  EXPECT_EQ(bucket[8], 400'000'000);  // log2(4/3) = 0.415 < log2(3/2) = 0.585: held
  EXPECT_EQ(bucket[10], 400'000'000);
}

TEST(PaceSearch, AgreesOnTheSlowestRankAndRemeasuresAfterAnInvalidIteration) {
  // Rank 1 is slower at small buckets only; the agreed (max) pace favours the large bucket on
  // both ranks. Iteration 3 is invalidated: bucket 1.25e7 is measured again on 4.
  auto config = pace_config();
  std::vector<std::unique_ptr<pc::PrefetchController>> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(pc::make_prefetch_controller(config, context(50'000'000, 1'000'000'000, r, 2)));
  std::map<int, std::vector<std::int64_t>> bucket;
  for (int i = 1; i <= 5; ++i) {
    std::vector<pc::Proposal> proposals;
    for (auto& c : ranks) {
      auto p = c->begin_iteration(i, i == 1 ? pc::TraceMode::kRecord : pc::TraceMode::kComplete);
      if (p) proposals.push_back(*p);
    }
    if (!proposals.empty()) {
      for (int r = 0; r < 2; ++r) ranks[static_cast<std::size_t>(r)]->apply(pc::agree(pc::Agreement::kAllReduceMax, proposals, r));
    }
    for (auto& c : ranks) bucket[i].push_back(c->bucket_numel());
    for (int r = 0; r < 2; ++r) {
      auto& c = *ranks[static_cast<std::size_t>(r)];
      const std::int64_t b = c.bucket_numel();
      const std::int64_t pace = (r == 1 && b < 50'000'000) ? 2'000'000 : 1'000'000 + b / 1000;
      c.observe(sample(i, pc::Phase::kForward, 0, pace));
      if (i == 3) c.on_trace_invalidated();
    }
  }
  EXPECT_EQ(bucket[3], (std::vector<std::int64_t>{12'500'000, 12'500'000}));
  EXPECT_EQ(bucket[4], (std::vector<std::int64_t>{12'500'000, 12'500'000}));  // measured again
  // Rank 0 alone would find 1.25e7 faster (1.0125 ms < 1.05 ms); the agreed max says 2 ms.
  EXPECT_EQ(bucket[5], (std::vector<std::int64_t>{200'000'000, 200'000'000}));
}

namespace {

// pace_search with a memory budget over a synthetic job whose pace keeps improving as the bucket
// grows (so only the budget stops the search) and whose peak reserved memory is `peak(bucket)`.
std::map<int, std::int64_t> budgeted_search(std::int64_t budget_bytes,
                                            const std::function<std::int64_t(std::int64_t)>& peak) {
  auto config = pace_config();
  config.memory_budget_bytes = budget_bytes;
  auto c = pc::make_prefetch_controller(config, context(12'500'000));
  const std::vector<std::string> columns{"peak_reserved_bytes"};
  c->bind_columns(columns);
  std::map<int, std::int64_t> bucket;
  for (int i = 1; i <= 12; ++i) {
    auto p = c->begin_iteration(i, i == 1 ? pc::TraceMode::kRecord : pc::TraceMode::kComplete);
    if (p) c->apply(*p);
    bucket[i] = c->bucket_numel();
    if (!c->wants_samples()) continue;
    const std::int64_t b = i == 1 ? 0 : bucket[i];  // iteration 1 records: nothing prefetched
    c->observe(sample(i, pc::Phase::kForward, 0, 1'000'000'000 / (1 + b / 1'000'000),
                      {peak(b)}));
  }
  return bucket;
}

}  // namespace

TEST(PaceSearch, MemoryBudgetNeedsPeakColumnAndIsNeverProbedAbove) {
  auto config = pace_config();
  config.memory_budget_bytes = 1'100'000'000;
  auto missing = pc::make_prefetch_controller(config, context());
  EXPECT_THROW(missing->bind_columns(std::vector<std::string>{"host_wait_ns"}), pc::MissingSampleColumn);

  // Peak = 1e9 + 16 bytes per bucket element, budget 1.5e9; a larger bucket is probed only when
  // predicted within 95% of the budget (1.425e9) from the largest measured bucket below it, at
  // the steepest measured slope (16 B/element, above the floor of 3 x 2 x 2 = 12) plus 20 MiB.
  const auto linear = [](std::int64_t b) { return 1'000'000'000 + 16 * b; };
  const auto bucket = budgeted_search(1'500'000'000, linear);
  for (const auto& [i, b] : bucket) EXPECT_LE(linear(b), 1'500'000'000) << "iteration " << i;
  // 1.25e7 (1.2e9), 3.125e6 (worse), 5e7 predicted 1.8e9: refine 6.25e6 (worse), 2.5e7
  // predicted 1.2e9 + 16 x 1.25e7 + 20 MiB = 1.421e9 (probed: better), then 5e7 still over.
  EXPECT_EQ(bucket.at(4), 6'250'000);
  EXPECT_EQ(bucket.at(5), 25'000'000);
  EXPECT_EQ(bucket.at(12), 25'000'000);
}

TEST(PaceSearch, MemoryBudgetAssumesGrowthEvenWhenMeasuredPeaksAreFlat) {
  // Reserved memory never shrinks, so measured peaks can look flat. The search still charges
  // 12 bytes per bf16 bucket element (3 buckets alive x 2 copies x 2 bytes): from 1.25e7 at
  // 1.2e9, 2.5e7 would be predicted at 1.2e9 + 1.5e8 + 20 MiB, over 95% of 1.3e9.
  const auto bucket = budgeted_search(1'300'000'000, [](std::int64_t) { return std::int64_t{1'200'000'000}; });
  EXPECT_EQ(bucket.at(12), 12'500'000);
  // With room for it, the same flat peaks let it grow.
  const auto roomy = budgeted_search(1'500'000'000, [](std::int64_t) { return std::int64_t{1'200'000'000}; });
  EXPECT_GT(roomy.at(12), 12'500'000);
}

// ------------------------------------------------------------------ configuration (controller:)

TEST(ControllerConfigKeys, PaceSearchDefaultsAndItsOwnKeys) {
  using prefetchlab::testing::parse_yaml;
  const pc::ControllerConfig d = pc::load_controller_config(parse_yaml("policy: pace_search\n"));
  EXPECT_EQ(d.policy, pc::ControllerPolicy::kPaceSearch);
  EXPECT_EQ(d.min_bucket_numel, 100'000);
  EXPECT_EQ(d.max_bucket_numel, 500'000'000);
  EXPECT_DOUBLE_EQ(d.search_factor, 4.0);
  EXPECT_EQ(d.memory_budget_bytes, 0);
  EXPECT_EQ(d.agreement, pc::Agreement::kAllReduceMax);
  EXPECT_EQ(d.timing, pc::TimingSource::kDeviceEvents);
  EXPECT_TRUE(pc::make_prefetch_controller(d, context())->required_columns().empty());

  const pc::ControllerConfig c = pc::load_controller_config(
      parse_yaml("policy: pace_search\nmemory_budget_bytes: 20GiB\nsearch_factor: 8\nmin_bucket_numel: 1e6\n"));
  EXPECT_EQ(c.memory_budget_bytes, 20LL << 30);
  EXPECT_DOUBLE_EQ(c.search_factor, 8.0);
  EXPECT_EQ(c.min_bucket_numel, 1'000'000);
  EXPECT_EQ(pc::make_prefetch_controller(c, context())->required_columns(),
            (std::vector<std::string>{"peak_reserved_bytes"}));

  for (const char* text : {"policy: pace_search\ngrow_factor: 2\n", "policy: pace_search\nagreement: none\n",
                           "policy: ema_threshold\nmemory_budget_bytes: 1GiB\n",
                           "policy: deepspeed_pr8431\nsearch_factor: 2\n", "policy: static\nmin_bucket_numel: 1\n"}) {
    const pc::InputError e =
        prefetchlab::testing::expect_input_error([&] { pc::load_controller_config(parse_yaml(text)); });
    EXPECT_NE(std::string(e.what()).find("is not used by policy"), std::string::npos) << text << e.what();
  }
}

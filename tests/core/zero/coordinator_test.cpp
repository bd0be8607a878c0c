// core::Coordinator against DeepSpeed's PartitionedParameterCoordinator rules
// (deepspeedai/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py; docs/architecture.md). One test per rule; expected numbers are derived in
// comments from the toy model below.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/zero/coordinator.hpp"
#include "tests/core/zero/coordinator_driver.hpp"

namespace pc = prefetchlab::core;
using pc::GatherKind;
using pc::Phase;
using pc::TraceMode;
using prefetchlab::testing::Driver;
using prefetchlab::testing::Logged;
using prefetchlab::testing::Source;
using prefetchlab::testing::totals;

namespace {

constexpr std::int64_t kHuge = 1'000'000'000;

// The toy model (module index = pre-order = execution order of forward pre-hooks):
//   0 root               container
//   1 embed              p0 wte (1000)              <- tied: lm_head uses the same parameter
//   2 block0             container
//   3   block0.fc1       p1 weight (100), p2 bias (10)
//   4   block0.fc2       p3 weight (100), p4 bias (10)
//   5 block1             container
//   6   block1.fc1       p5 weight (100), p6 bias (10)
//   7   block1.fc2       p7 weight (100), p8 bias (10)
//   8 lm_head            p0
// Unique numel: 1000 + 4 * 110 = 1440.
//
// One training iteration calls fetch/release like DeepSpeed's hooks: forward pre-order
// (fetch parent, children, release parent), backward pre-backward(parent), children in reverse,
// post-backward(parent). The recorded trace therefore has 18 steps:
//   forward:  0 root, 1 embed, 2 block0, 3 fc1, 4 fc2, 5 block1, 6 fc1', 7 fc2', 8 lm_head
//   backward: 9 root, 10 lm_head, 11 block1, 12 fc2', 13 fc1', 14 block0, 15 fc2, 16 fc1,
//             17 embed
// and the parameter trace (index: param@step) is
//   0:p0@1  1:p1@3  2:p2@3  3:p3@4  4:p4@4  5:p5@6  6:p6@6  7:p7@7  8:p8@7  9:p0@8
//   10:p0@10 11:p7@12 12:p8@12 13:p5@13 14:p6@13 15:p3@15 16:p4@15 17:p1@16 18:p2@16 19:p0@17
constexpr int kRoot = 0, kEmbed = 1, kBlock0 = 2, kFc1 = 3, kFc2 = 4, kBlock1 = 5, kFc1b = 6,
              kFc2b = 7, kLmHead = 8;

int add_module(pc::ModelSpec& model, const char* name, int parent, std::vector<int> params) {
  pc::ModuleSpec module;
  module.name = name;
  module.class_name = params.empty() ? "Container" : "Linear";
  module.parent = parent;
  module.depth = parent < 0 ? 0 : model.modules[static_cast<std::size_t>(parent)].depth + 1;
  module.param_ids = std::move(params);
  model.modules.push_back(std::move(module));
  const int index = static_cast<int>(model.modules.size()) - 1;
  if (parent >= 0) model.modules[static_cast<std::size_t>(parent)].children.push_back(index);
  return index;
}

pc::ModelSpec toy_model(pc::DType weight_dtype = pc::DType::kBF16,
                        pc::DType bias_dtype = pc::DType::kBF16) {
  pc::ModelSpec model;
  model.name = "toy";
  model.params.push_back({"wte.weight", 1000, weight_dtype, 0, 0});
  for (const char* layer : {"block0.fc1", "block0.fc2", "block1.fc1", "block1.fc2"}) {
    model.params.push_back({std::string(layer) + ".weight", 100, weight_dtype, 10, 10});
    model.params.push_back({std::string(layer) + ".bias", 10, bias_dtype, 0, 0});
  }
  add_module(model, "", -1, {});
  add_module(model, "embed", kRoot, {0});
  add_module(model, "block0", kRoot, {});
  add_module(model, "block0.fc1", kBlock0, {1, 2});
  add_module(model, "block0.fc2", kBlock0, {3, 4});
  add_module(model, "block1", kRoot, {});
  add_module(model, "block1.fc1", kBlock1, {5, 6});
  add_module(model, "block1.fc2", kBlock1, {7, 8});
  add_module(model, "lm_head", kRoot, {0});
  return model;
}

std::vector<bool> biases_persistent() {
  return {false, false, true, false, true, false, true, false, true};
}

pc::CoordinatorConfig config(std::int64_t bucket, std::int64_t reuse = kHuge,
                             std::int64_t max_live = kHuge) {
  pc::CoordinatorConfig c;
  c.prefetch_bucket_numel = bucket;
  c.max_reuse_distance_numel = reuse;
  c.max_live_numel = max_live;
  return c;
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(Coordinator, TraceModesAdvanceInvalidRecordComplete) {
  Driver d(toy_model(), config(kHuge));
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kInvalid);
  d.iteration();
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kRecord);
  d.iteration();
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kComplete);
  // The recorded trace is the 18 steps of the header comment; the parameter trace has 20
  // entries, one per (module step, direct param).
  EXPECT_EQ(d.coord().recorded_modules(),
            (std::vector<int>{kRoot, kEmbed, kBlock0, kFc1, kFc2, kBlock1, kFc1b, kFc2b, kLmHead,
                              kRoot, kLmHead, kBlock1, kFc2b, kFc1b, kBlock0, kFc2, kFc1,
                              kEmbed}));
  EXPECT_EQ(d.coord().parameter_trace().param_ids(),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 7, 8, 5, 6, 3, 4, 1, 2, 0}));
  EXPECT_EQ(d.coord().parameter_trace().param_step_ids(),
            (std::vector<int>{1, 3, 3, 4, 4, 6, 6, 7, 7, 8, 10, 12, 12, 13, 13, 15, 15, 16, 16,
                              17}));
  // Non-COMPLETE resets check traces across ranks: 1 list (INVALID->RECORD), 3 lists
  // (RECORD->COMPLETE); a COMPLETE reset checks nothing.
  std::vector<int> lists;
  for (const auto& e : d.events()) {
    if (const auto* c = std::get_if<pc::RankTraceCheck>(&e.action)) lists.push_back(c->lists);
  }
  EXPECT_EQ(lists, (std::vector<int>{1, 3}));
}

TEST(Coordinator, RecordingIterationHasNoPrefetch) {
  Driver d(toy_model(), config(kHuge));
  d.iteration();  // #1 records
  EXPECT_EQ(d.count_prefetch_rounds(1), 0);
  EXPECT_TRUE(d.gathers(1, std::nullopt, GatherKind::kPrefetch).empty());
  // Everything is fetched on demand, and RECORD releases every direct param after its module,
  // so the tied p0 is gathered twice per pass: embed 1000 + four linears 4*110 + lm_head 1000
  // = 6 gathers, 2440 numel, in forward and again in backward.
  EXPECT_EQ(totals(d.gathers(1, Phase::kForward, GatherKind::kOnDemand)),
            std::make_pair(6, std::int64_t{2440}));
  EXPECT_EQ(totals(d.gathers(1, Phase::kBackward, GatherKind::kOnDemand)),
            std::make_pair(6, std::int64_t{2440}));
  // Counter-check: #2 prefetches. Root's round (budget min(1e9 - 0, 1e9)) pops the whole
  // queue and selects every parameter once: one gather of 1440; nothing on demand.
  d.iteration();
  EXPECT_EQ(totals(d.gathers(2, std::nullopt, GatherKind::kPrefetch)),
            std::make_pair(1, std::int64_t{1440}));
  EXPECT_TRUE(d.gathers(2, std::nullopt, GatherKind::kOnDemand).empty());
}

TEST(Coordinator, DivergenceInvalidatesThenRecordsThenPrefetches) {
  // Bucket 1: every round selects exactly one not-available parameter, so prefetch happens at
  // every fetch while the trace holds.
  Driver d(toy_model(), config(1));
  d.iteration();  // #1 RECORD
  d.iteration();  // #2 COMPLETE
  // #3: block1 does not run. Steps 0..4 match; at step 5 the trace expects block1 (5) and gets
  // lm_head (8).
  d.iteration({kBlock1});
  const auto events = d.events_of(3);
  const auto invalid = std::find_if(events.begin(), events.end(), [](const Logged& e) {
    return std::holds_alternative<pc::TraceInvalidated>(e.action);
  });
  ASSERT_NE(invalid, events.end());
  const auto& marker = std::get<pc::TraceInvalidated>(invalid->action);
  EXPECT_EQ(marker.step_id, 5);
  EXPECT_EQ(marker.expected_module, kBlock1);
  EXPECT_EQ(marker.actual_module, kLmHead);
  EXPECT_EQ(marker.trace_length, 18);
  EXPECT_TRUE(d.info(3, Phase::kForward, kLmHead).trace_invalidated);
  // Before the divergence, steps 0..4 each ran a prefetch round...
  const auto rounds_before = std::count_if(events.begin(), invalid, [](const Logged& e) {
    return std::holds_alternative<pc::PrefetchRound>(e.action);
  });
  EXPECT_EQ(rounds_before, 5);
  // ...after it none: no round and no prefetch gather in the rest of the iteration.
  EXPECT_TRUE(std::none_of(invalid, events.end(), [](const Logged& e) {
    const auto* g = std::get_if<pc::Gather>(&e.action);
    return std::holds_alternative<pc::PrefetchRound>(e.action) ||
           (g != nullptr && g->kind == GatherKind::kPrefetch);
  }));
  // The round of step 4 (fc2) had prefetched p5 (queue: ... p4@4 consumed, next p5@6); the
  // invalidation drains it: wait without throttle, then release.
  const auto drained = std::find_if(invalid, events.end(), [](const Logged& e) {
    const auto* w = std::get_if<pc::Wait>(&e.action);
    return w != nullptr && w->context == pc::WaitContext::kDrain;
  });
  ASSERT_NE(drained, events.end());
  EXPECT_EQ(std::get<pc::Wait>(drained->action).param_id, 5);
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kInvalid);

  d.iteration();  // #4 records again: no prefetch at all
  EXPECT_EQ(d.count_prefetch_rounds(4), 0);
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kRecord);
  d.iteration();  // #5 prefetches again: 18 fetches, 18 rounds
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kComplete);
  EXPECT_EQ(d.count_prefetch_rounds(5), 18);
  EXPECT_FALSE(d.gathers(5, std::nullopt, GatherKind::kPrefetch).empty());
}

TEST(Coordinator, LongerIterationThanTraceInvalidates) {
  // step_id >= len(trace) also invalidates: an extra forward of lm_head after a whole iteration.
  Driver d(toy_model(), config(kHuge));
  d.iteration();
  d.iteration();
  const auto info = d.fetch(kLmHead, Phase::kBackward);  // step 18 of an 18-step trace
  EXPECT_TRUE(info.trace_invalidated);
  EXPECT_EQ(info.trace_mode, TraceMode::kInvalid);
  EXPECT_EQ(info.on_demand, (pc::ParamCount{1, 1000}));
}

TEST(Coordinator, PrefetchRoundsOvershootByAtMostOneParameter) {
  Driver d(toy_model(), config(150));
  d.iteration();
  d.iteration();
  // Iteration #2, bucket 150 (queue indices from the header comment):
  //  step 0 root:   budget min(1e9-0, 150)=150; pop p0 (1000) -> 1000 >= 150, stop.
  //  step 1 embed:  budget 150; p1 100, p2 10 (110 < 150), p3 100 -> 210, stop.
  //  step 2 block0: budget 150; p4 10, p5 100, p6 10 (120 < 150), p7 100 -> 220, stop.
  //  step 3 fc1:    p8 10, then p0@8, p0@10 (available), p7@12 (in flight), p8@12 (chosen
  //                 already), p5.. p0@17 (in flight or available): queue empty at 10.
  const auto prefetches = d.gathers(2, Phase::kForward, GatherKind::kPrefetch);
  ASSERT_EQ(prefetches.size(), 4u);
  EXPECT_EQ(prefetches[0].param_ids, (std::vector<int>{0}));
  EXPECT_EQ(prefetches[1].param_ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(prefetches[2].param_ids, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(prefetches[3].param_ids, (std::vector<int>{8}));
  EXPECT_EQ(prefetches[0].numel, 1000);
  EXPECT_EQ(prefetches[1].numel, 210);
  EXPECT_EQ(prefetches[2].numel, 220);
  EXPECT_EQ(prefetches[3].numel, 10);
  // Overshoot: each round exceeds 150 only by its last parameter (the one popped last in trace
  // order = the highest ds_id here): 1000-1000 = 0, 210-100 = 110, 220-100 = 120, all < 150.
  for (const auto& g : prefetches) {
    const std::int64_t last = g.param_ids.back() == 0 ? 1000 : (g.param_ids.back() % 2 ? 100 : 10);
    EXPECT_LT(g.numel - last, 150);
  }
  EXPECT_TRUE(d.gathers(2, Phase::kBackward, GatherKind::kPrefetch).empty());
  EXPECT_TRUE(d.gathers(2, std::nullopt, GatherKind::kOnDemand).empty());
}

TEST(Coordinator, WaitThenPrefetchOrder) {
  Driver d(toy_model(), config(150));
  d.iteration();
  d.forward();
  // Step 3 (block0.fc1) of iteration #2: its p1, p2 were prefetched at step 1 (one handle with
  // p3), so: wait p1 (first wait on the handle), wait p2, compute waits for the all-gather
  // stream, then the round (budget 150) and its gather of p8.
  std::vector<pc::PlanAction> actions;
  for (const auto& e : d.events_of(2)) {
    if (e.source == Source::kFetch && e.module == kFc1 && e.phase == Phase::kForward) {
      actions.push_back(e.action);
    }
  }
  ASSERT_EQ(actions.size(), 5u);
  const auto& w1 = std::get<pc::Wait>(actions[0]);
  const auto& w2 = std::get<pc::Wait>(actions[1]);
  EXPECT_EQ(w1.param_id, 1);
  EXPECT_EQ(w1.context, pc::WaitContext::kFetch);
  EXPECT_TRUE(w1.first_on_handle);
  EXPECT_FALSE(w1.last_on_handle);  // p3 still references the handle
  EXPECT_EQ(w2.param_id, 2);
  EXPECT_FALSE(w2.first_on_handle);
  EXPECT_EQ(w1.handle_id, w2.handle_id);
  EXPECT_TRUE(std::holds_alternative<pc::ComputeWaitsForAllGather>(actions[2]));
  EXPECT_EQ(std::get<pc::PrefetchRound>(actions[3]).budget_numel, 150);
  EXPECT_EQ(std::get<pc::Gather>(actions[4]).param_ids, (std::vector<int>{8}));
  // Step 4 (fc2): p3 is AVAILABLE already (materialised by the first wait) but still in the
  // registry: counted in flight, and its wait is the handle's last.
  const auto& fc2 = d.info(2, Phase::kForward, kFc2);
  EXPECT_EQ(fc2.in_flight, (pc::ParamCount{2, 110}));  // p3 (handle of step 1), p4 (step 2)
  EXPECT_EQ(fc2.on_demand, (pc::ParamCount{}));
}

TEST(Coordinator, OnDemandFetchWhenPrefetchFallsBehind) {
  // Bucket 1: one parameter per round, so prefetch lags behind the trace.
  Driver d(toy_model(), config(1));
  d.iteration();
  d.forward();
  // Iteration #2: step 0 picks p0; step 1 p1; step 2 p2; step 3 (fc1: p1, p2 in flight) p3;
  // step 4 (fc2): p3 in flight, p4 not yet -> p4 on demand (10); its own entry p4@4 is popped
  // by queue consumption, and the round then picks p5.
  const auto& fc2 = d.info(2, Phase::kForward, kFc2);
  EXPECT_EQ(fc2.in_flight, (pc::ParamCount{1, 100}));
  EXPECT_EQ(fc2.on_demand, (pc::ParamCount{1, 10}));
  EXPECT_EQ(fc2.prefetched, (pc::ParamCount{1, 100}));
}

TEST(Coordinator, OwnEntriesArePoppedOffTheQueue) {
  // Bucket 0: no prefetch, yet a COMPLETE trace still consumes each module's own entries.
  Driver d(toy_model(), config(0));
  d.iteration();
  d.coord().reset_step();
  const std::vector<int> modules{kRoot, kEmbed, kBlock0, kFc1, kFc2};
  // Entries after each fetch: root 0, embed 1 (p0@1), block0 1, fc1 3 (p1@3, p2@3), fc2 5.
  const std::vector<std::size_t> expected{0, 1, 1, 3, 5};
  for (std::size_t i = 0; i < modules.size(); ++i) {
    d.coord().fetch_sub_module(modules[i], Phase::kForward);
    EXPECT_EQ(d.coord().fetch_queue_position(), expected[i]) << "after module " << modules[i];
  }
}

TEST(Coordinator, NAvailableResetsEachForward) {
  // Biases persistent; max_live 1440 (the whole model), bucket 1e9, reuse 1e9.
  auto cfg = config(kHuge, kHuge, 1440);
  cfg.persistent = biases_persistent();
  Driver d(toy_model(), cfg);
  d.iteration();  // #1 RECORD: all gathered and released again (persistent too): n_available 0
  EXPECT_EQ(d.coord().n_available_numel(), 0);
  // #2: root's round, budget min(1440 - 0, 1e9) = 1440, gathers all 1440. Backward releases
  // every non-persistent param at its last use (1400); the biases stay: n_available = 40.
  d.iteration();
  EXPECT_EQ(d.coord().n_available_numel(), 40);
  EXPECT_EQ(d.coord().param_state(2), pc::ParamState::kAvailable);
  // #3: the reset zeroes n_available although the biases are still resident, so root's budget
  // is min(1440 - 0, 1e9) = 1440 (it would be 1400 without the reset) and it gathers the 1400
  // non-persistent numel, popping the available biases for free.
  d.coord().reset_step();
  EXPECT_EQ(d.coord().n_available_numel(), 0);
  const auto root = d.fetch(kRoot, Phase::kForward);
  std::int64_t budget = -1;
  for (const auto& e : d.events()) {
    if (const auto* r = std::get_if<pc::PrefetchRound>(&e.action)) budget = r->budget_numel;
  }
  EXPECT_EQ(budget, 1440);
  EXPECT_EQ(root.prefetched, (pc::ParamCount{5, 1400}));
  EXPECT_EQ(d.coord().n_available_numel(), 1400);
}

TEST(Coordinator, MaxLiveLimitsPrefetchOnly) {
  // max_live 1100, bucket 1e9: root's round has budget 1100 and stops at p0 + p1 = 1100;
  // embed's round has budget 1100 - 1100 = 0 and selects nothing; on-demand fetches ignore it.
  Driver d(toy_model(), config(kHuge, kHuge, 1100));
  d.iteration();
  d.forward();
  const auto root = d.info(2, Phase::kForward, kRoot);
  EXPECT_EQ(root.prefetched, (pc::ParamCount{2, 1100}));
  EXPECT_EQ(d.info(2, Phase::kForward, kEmbed).prefetched, (pc::ParamCount{}));
  // block0.fc1 then fetches p2 on demand (10) although n_available is already at max_live.
  EXPECT_EQ(d.info(2, Phase::kForward, kFc1).on_demand, (pc::ParamCount{1, 10}));
}

TEST(Coordinator, BucketZeroMeansNoPrefetch) {
  Driver d(toy_model(), config(0));
  d.iteration();
  d.iteration();
  EXPECT_EQ(d.count_prefetch_rounds(2), 0);
  EXPECT_TRUE(d.gathers(2, std::nullopt, GatherKind::kPrefetch).empty());
  // Reuse 1e9 keeps everything fetched in forward: forward gathers embed p0, the four linears
  // (5 gathers, 1440); lm_head finds p0 resident; backward gathers nothing.
  EXPECT_EQ(totals(d.gathers(2, Phase::kForward, GatherKind::kOnDemand)),
            std::make_pair(5, std::int64_t{1440}));
  EXPECT_TRUE(d.gathers(2, Phase::kBackward).empty());
}

TEST(Coordinator, MaxLiveZeroMeansNoPrefetch) {
  Driver d(toy_model(), config(kHuge, kHuge, 0));
  d.iteration();
  d.iteration();
  // The rounds still run (18 of them) but their budget min(0 - n_available, 1e9) is <= 0.
  EXPECT_EQ(d.count_prefetch_rounds(2), 18);
  for (const auto& e : d.events_of(2)) {
    if (const auto* r = std::get_if<pc::PrefetchRound>(&e.action)) {
      EXPECT_LE(r->budget_numel, 0);
    }
  }
  EXPECT_TRUE(d.gathers(2, std::nullopt, GatherKind::kPrefetch).empty());
  EXPECT_EQ(totals(d.gathers(2, Phase::kForward, GatherKind::kOnDemand)),
            std::make_pair(5, std::int64_t{1440}));
}

TEST(Coordinator, PersistentNeverReleasedInCompleteTrace) {
  // Reuse distance 0 and bucket 0: every non-persistent param goes right after its module.
  auto cfg = config(0, 0);
  cfg.persistent = biases_persistent();
  Driver d(toy_model(), cfg);
  d.iteration();
  // RECORD releases persistent params too (all direct params are candidates).
  EXPECT_EQ(sorted(d.released_params(1, Phase::kForward)),
            (std::vector<int>{0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  d.iteration();
  d.iteration();
  for (const int it : {2, 3}) {
    for (const int p : d.released_params(it)) {
      EXPECT_FALSE(d.coord().is_persistent(p)) << "iteration " << it << " released " << p;
    }
    // Non-persistent ones are released: p0 twice per pass (embed, lm_head), weights once.
    EXPECT_EQ(sorted(d.released_params(it, Phase::kForward)),
              (std::vector<int>{0, 0, 1, 3, 5, 7}));
  }
  // Gathered once in #2 (on demand), the biases are never gathered again in #3.
  EXPECT_EQ(totals(d.gathers(3, Phase::kForward, GatherKind::kOnDemand)),
            std::make_pair(6, std::int64_t{2400}));  // 1000 + 4*100 + 1000
  for (const int p : {2, 4, 6, 8}) {
    EXPECT_EQ(d.coord().param_state(p), pc::ParamState::kAvailable);
  }
}

TEST(Coordinator, ContainerModulesRunPrefetchRounds) {
  Driver d(toy_model(), config(150));
  d.iteration();
  d.forward();
  // Iteration #2, bucket 150 (see PrefetchRoundsOvershootByAtMostOneParameter): root (step 0)
  // prefetches p0 and block0 (step 2) p4..p7, although neither has a parameter of its own.
  const auto root = d.info(2, Phase::kForward, kRoot);
  const auto block0 = d.info(2, Phase::kForward, kBlock0);
  EXPECT_EQ(root.on_demand.params + root.in_flight.params + root.available.params, 0);
  EXPECT_EQ(root.prefetched, (pc::ParamCount{1, 1000}));
  EXPECT_EQ(block0.prefetched, (pc::ParamCount{4, 220}));
  // Its plan: compute waits for the all-gather stream, then the round and its gather.
  std::vector<pc::PlanAction> actions;
  for (const auto& e : d.events_of(2)) {
    if (e.source == Source::kFetch && e.module == kBlock0) actions.push_back(e.action);
  }
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<pc::ComputeWaitsForAllGather>(actions[0]));
  EXPECT_TRUE(std::holds_alternative<pc::PrefetchRound>(actions[1]));
  EXPECT_EQ(std::get<pc::Gather>(actions[2]).kind, GatherKind::kPrefetch);
}

TEST(Coordinator, MaxReuseDistanceZeroVsHugeChangesReleases) {
  // Bucket 0 isolates the reuse-distance rule from the prefetch scan.
  Driver keep(toy_model(), config(0, kHuge));
  Driver drop(toy_model(), config(0, 0));
  for (Driver* d : {&keep, &drop}) {
    d->iteration();
    d->iteration();
  }
  // 1e9: every later use lies within the scan, so forward releases nothing and backward
  // releases each param at its last use (p0 at embed, the last module): all 9, once.
  EXPECT_TRUE(keep.released_params(2, Phase::kForward).empty());
  EXPECT_EQ(sorted(keep.released_params(2, Phase::kBackward)),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(totals(keep.gathers(2)), std::make_pair(5, std::int64_t{1440}));
  // 0: nothing is scanned, so each module releases its params at once; p0 is gathered and
  // released twice per pass: per pass 6 gathers, 2440 numel.
  EXPECT_EQ(sorted(drop.released_params(2, Phase::kForward)),
            (std::vector<int>{0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(totals(drop.gathers(2, Phase::kForward)), std::make_pair(6, std::int64_t{2440}));
  EXPECT_EQ(totals(drop.gathers(2, Phase::kBackward)), std::make_pair(6, std::int64_t{2440}));
}

TEST(Coordinator, ReuseDistanceCheckPrecedesEachModule) {
  // embed releases at step 2; the scan of trace[2:] accumulates block0 0, fc1 110, fc2 220,
  // block1 220, fc1' 330, fc2' 440 and is checked before each module: with 441 it still scans
  // lm_head (step 8) and keeps p0; with 440 it stops before lm_head and releases p0, which
  // lm_head then gathers again.
  for (const auto& [reuse, regathered] :
       {std::pair<std::int64_t, bool>{441, false}, std::pair<std::int64_t, bool>{440, true}}) {
    Driver d(toy_model(), config(0, reuse));
    d.iteration();
    d.forward();
    EXPECT_EQ(d.info(2, Phase::kForward, kLmHead).on_demand.params, regathered ? 1 : 0)
        << "reuse " << reuse;
  }
  // With 0 not even the very next module is scanned. A model where lm_head directly follows
  // embed (trace: 0 root, 1 embed, 2 lm_head): embed releases at step 2 and would see p0 in
  // trace[2] if the first module were always scanned; it is not, so p0 is gathered again.
  pc::ModelSpec tiny;
  tiny.params.push_back({"wte.weight", 1000, pc::DType::kBF16, 0, 0});
  add_module(tiny, "", -1, {});
  add_module(tiny, "embed", 0, {0});
  add_module(tiny, "lm_head", 0, {0});
  pc::Coordinator c(tiny, config(0, 0));
  for (int it = 1; it <= 2; ++it) {
    c.reset_step();
    c.fetch_sub_module(0, Phase::kForward);
    c.fetch_sub_module(1, Phase::kForward);
    const auto released = c.release_sub_module(1, Phase::kForward);
    const auto head = c.fetch_sub_module(2, Phase::kForward);
    c.release_sub_module(2, Phase::kForward);
    c.release_sub_module(0, Phase::kForward);
    ASSERT_EQ(released.actions.size(), 1u) << "iteration " << it;
    EXPECT_EQ(head.info.on_demand, (pc::ParamCount{1, 1000})) << "iteration " << it;
  }
}

TEST(Coordinator, TiedWeightFetchedByTwoModules) {
  {
    // RECORD: released after embed, gathered again for lm_head.
    Driver d(toy_model(), config(0));
    d.forward();
    const auto on_demand = d.gathers(1, Phase::kForward, GatherKind::kOnDemand);
    EXPECT_EQ(std::count_if(on_demand.begin(), on_demand.end(),
                            [](const pc::Gather& g) { return g.param_ids == std::vector<int>{0}; }),
              2);
  }
  {
    // COMPLETE, reuse distance 0 but bucket 1e9: root's round pops the whole queue, so
    // "most recent step fetched for" p0 is 17 (its last use). embed's release at step 2 skips
    // p0 (17 > 2) although the reuse scan is empty: p0 is gathered once in the iteration and
    // lm_head finds it available; it is released only by embed's backward release (step 18).
    Driver d(toy_model(), config(kHuge, 0));
    d.iteration();
    d.iteration();
    int p0_gathers = 0;
    for (const auto& g : d.gathers(2)) {
      p0_gathers += static_cast<int>(std::count(g.param_ids.begin(), g.param_ids.end(), 0));
    }
    EXPECT_EQ(p0_gathers, 1);
    EXPECT_EQ(d.info(2, Phase::kForward, kLmHead).available, (pc::ParamCount{1, 1000}));
    EXPECT_EQ(d.info(2, Phase::kBackward, kLmHead).available, (pc::ParamCount{1, 1000}));
    const auto released = d.released_params(2);
    EXPECT_EQ(std::count(released.begin(), released.end(), 0), 1);
  }
}

TEST(Coordinator, CoalescedGatherPerDtypeGroup) {
  // Weights bf16, biases fp32, world size 4 (a 10-element bias pads to 12).
  auto cfg = config(kHuge);
  cfg.world_size = 4;
  Driver d(toy_model(pc::DType::kBF16, pc::DType::kFP32), cfg);
  d.forward();
  // RECORD, block0.fc1 on demand: one call, one handle, two collectives (bf16 p1, fp32 p2);
  // the wait on p1 covers both.
  std::vector<pc::Gather> fc1;
  std::vector<pc::Wait> fc1_waits;
  for (const auto& e : d.events_of(1)) {
    if (e.module != kFc1 || e.source != Source::kFetch) continue;
    if (const auto* g = std::get_if<pc::Gather>(&e.action)) fc1.push_back(*g);
    if (const auto* w = std::get_if<pc::Wait>(&e.action)) fc1_waits.push_back(*w);
  }
  ASSERT_EQ(fc1.size(), 2u);
  EXPECT_EQ(fc1[0].dtype, pc::DType::kBF16);
  EXPECT_EQ(fc1[0].param_ids, (std::vector<int>{1}));
  EXPECT_EQ(fc1[1].dtype, pc::DType::kFP32);
  EXPECT_EQ(fc1[1].param_ids, (std::vector<int>{2}));
  EXPECT_EQ(fc1[0].handle_id, fc1[1].handle_id);
  EXPECT_TRUE(fc1[0].collective);
  ASSERT_EQ(fc1_waits.size(), 2u);
  EXPECT_EQ(fc1_waits[0].gather_ids,
            (std::vector<std::int64_t>{fc1[0].gather_id, fc1[1].gather_id}));
  d.backward();
  // COMPLETE: root's round selects all nine; dtype groups in order of first appearance by
  // ds_id: bf16 {p0,p1,p3,p5,p7} 1400 (padded 1400), fp32 {p2,p4,p6,p8} 40 (padded 4*12 = 48).
  d.forward();
  const auto prefetch = d.gathers(2, Phase::kForward, GatherKind::kPrefetch);
  ASSERT_EQ(prefetch.size(), 2u);
  EXPECT_EQ(prefetch[0].param_ids, (std::vector<int>{0, 1, 3, 5, 7}));
  EXPECT_EQ(prefetch[0].numel, 1400);
  EXPECT_EQ(prefetch[0].padded_numel, 1400);
  EXPECT_EQ(prefetch[1].param_ids, (std::vector<int>{2, 4, 6, 8}));
  EXPECT_EQ(prefetch[1].numel, 40);
  EXPECT_EQ(prefetch[1].padded_numel, 48);
  EXPECT_EQ(prefetch[0].handle_id, prefetch[1].handle_id);
}

TEST(Coordinator, AllgatherSequentialGathersEachParamAlone) {
  auto cfg = config(kHuge);
  cfg.allgather_sequential = true;
  Driver d(toy_model(), cfg);
  // The engine's rule: sequential forces the prefetch bucket to 1.
  EXPECT_EQ(d.coord().prefetch_bucket_numel(), 1);
  d.forward();
  // RECORD: fc1's p1 and p2 are two gathers with two handles.
  std::vector<pc::Gather> fc1;
  for (const auto& e : d.events_of(1)) {
    const auto* g = std::get_if<pc::Gather>(&e.action);
    if (g != nullptr && e.module == kFc1) fc1.push_back(*g);
  }
  ASSERT_EQ(fc1.size(), 2u);
  EXPECT_NE(fc1[0].handle_id, fc1[1].handle_id);
  for (const auto& e : d.events()) {
    if (const auto* g = std::get_if<pc::Gather>(&e.action)) {
      EXPECT_EQ(g->param_ids.size(), 1u);
    }
  }
}

TEST(Coordinator, WorldSizeOneLaunchesNoCollective) {
  Driver d(toy_model(), config(kHuge));
  d.forward();
  const auto gathers = d.gathers(1);
  ASSERT_FALSE(gathers.empty());
  for (const auto& g : gathers) {
    EXPECT_FALSE(g.collective);
    EXPECT_EQ(g.padded_numel, g.numel);
  }
}

TEST(Coordinator, OptimizerStepReleasesAllAndRegathersPersistent) {
  auto cfg = config(150);
  cfg.persistent = biases_persistent();
  Driver d(toy_model(), cfg);
  d.iteration();
  d.optimizer_step();  // after #1 everything is partitioned; the biases come back
  for (const int p : {2, 4, 6, 8}) {
    EXPECT_EQ(d.coord().param_state(p), pc::ParamState::kAvailable);
  }
  d.iteration();  // #2: the resident biases stay (persistent)
  // #3 stops after root's fetch: its round (budget 150) has p0 (1000) in flight.
  d.coord().reset_step();
  d.fetch(kRoot, Phase::kForward);
  ASSERT_TRUE(d.coord().in_flight(0));
  EXPECT_EQ(d.coord().n_available_numel(), 1000);
  const pc::Plan plan = d.coord().optimizer_step();
  // release_and_reset_all in ds_id order: p0 is waited (drain, no throttle) and released,
  // then the resident biases are released: one Release {0,2,4,6,8} of 1040 numel.
  ASSERT_EQ(plan.actions.size(), 5u);
  const auto& wait = std::get<pc::Wait>(plan.actions[0]);
  EXPECT_EQ(wait.param_id, 0);
  EXPECT_EQ(wait.context, pc::WaitContext::kDrain);
  const auto& release = std::get<pc::Release>(plan.actions[1]);
  EXPECT_EQ(release.param_ids, (std::vector<int>{0, 2, 4, 6, 8}));
  EXPECT_EQ(release.numel, 1040);
  EXPECT_TRUE(std::holds_alternative<pc::OptimizerUpdate>(plan.actions[2]));
  // Then one blocking gather of every persistent param: {2,4,6,8}, 40 numel.
  const auto& regather = std::get<pc::Gather>(plan.actions[3]);
  EXPECT_EQ(regather.kind, GatherKind::kPersistentRegather);
  EXPECT_EQ(regather.param_ids, (std::vector<int>{2, 4, 6, 8}));
  EXPECT_EQ(regather.numel, 40);
  const auto& blocking = std::get<pc::Wait>(plan.actions[4]);
  EXPECT_EQ(blocking.context, pc::WaitContext::kBlocking);
  EXPECT_EQ(blocking.gather_ids, (std::vector<std::int64_t>{regather.gather_id}));
  for (int p = 0; p < d.coord().num_params(); ++p) {
    EXPECT_EQ(d.coord().param_state(p), d.coord().is_persistent(p)
                                            ? pc::ParamState::kAvailable
                                            : pc::ParamState::kNotAvailable);
    EXPECT_FALSE(d.coord().in_flight(p));
  }
  // n_available: 1000 - 1040 = -40; the re-gather bypasses the coordinator's accounting, as
  // in DeepSpeed, and the next reset zeroes it.
  EXPECT_EQ(d.coord().n_available_numel(), -40);
  d.coord().reset_step();
  EXPECT_EQ(d.coord().n_available_numel(), 0);
}

TEST(Coordinator, ResetDrainsInFlightParams) {
  Driver d(toy_model(), config(150));
  d.iteration();
  d.coord().reset_step();
  d.fetch(kRoot, Phase::kForward);  // p0 prefetched, in flight
  const pc::Plan plan = d.coord().reset_step();
  ASSERT_EQ(plan.actions.size(), 2u);
  EXPECT_EQ(std::get<pc::Wait>(plan.actions[0]).context, pc::WaitContext::kDrain);
  EXPECT_TRUE(std::get<pc::Wait>(plan.actions[0]).last_on_handle);
  EXPECT_EQ(std::get<pc::Release>(plan.actions[1]).param_ids, (std::vector<int>{0}));
  EXPECT_EQ(d.coord().param_state(0), pc::ParamState::kNotAvailable);
}

TEST(Coordinator, AdaptiveBucketChangeAppliesFromNextFetch) {
  Driver d(toy_model(), config(0));
  d.iteration();
  d.coord().set_prefetch_bucket_numel(150);
  d.iteration();
  // Same rounds as with a configured bucket of 150.
  EXPECT_EQ(totals(d.gathers(2, Phase::kForward, GatherKind::kPrefetch)),
            std::make_pair(4, std::int64_t{1440}));
  EXPECT_THROW(d.coord().set_prefetch_bucket_numel(-1), std::invalid_argument);
}

TEST(Coordinator, RejectsBadConfig) {
  auto cfg = config(0);
  cfg.persistent = {true};
  EXPECT_THROW((pc::Coordinator{toy_model(), cfg}), std::invalid_argument);
  cfg = config(-1);
  EXPECT_THROW((pc::Coordinator{toy_model(), cfg}), std::invalid_argument);
  cfg = config(0);
  cfg.world_size = 0;
  EXPECT_THROW((pc::Coordinator{toy_model(), cfg}), std::invalid_argument);
  pc::Coordinator ok(toy_model(), config(0));
  EXPECT_THROW(ok.fetch_sub_module(9, Phase::kForward), std::out_of_range);
}

TEST(Coordinator, ReleaseCandidatesAreCachedPerModuleAndStep) {
  // DeepSpeed lru_caches __params_to_release on (module, step) for the coordinator's life, even
  // across trace invalidation and re-recording. Reuse distance 441, bucket 0.
  Driver d(toy_model(), config(0, 441));
  d.iteration();  // #1 records the normal trace
  d.iteration();  // #2: embed's release at step 2 sees lm_head (step 8) within 441: keeps p0
  EXPECT_EQ(d.info(2, Phase::kForward, kLmHead).available, (pc::ParamCount{1, 1000}));
  d.iteration({kLmHead});  // #3: lm_head is skipped -> invalidated at step 8
  d.iteration({kLmHead});  // #4 records the trace without lm_head
  d.iteration({kLmHead});  // #5 COMPLETE on the new trace
  EXPECT_EQ(d.coord().trace_mode(), TraceMode::kComplete);
  // On the new trace, a fresh scan from step 2 (block0 0, fc1 110, fc2 220, block1 220,
  // fc1' 330, fc2' 440, root 440, block1 440, fc2' 550: stop) would not meet p0 and release
  // it; the cached answer of #2 keeps it, so embed's forward release frees nothing in #5 and
  // embed's backward fetch finds p0 resident.
  for (const auto& e : d.events_of(5)) {
    if (e.source == Source::kRelease && e.module == kEmbed && e.phase == Phase::kForward) {
      ADD_FAILURE() << "embed released in forward";
    }
  }
  EXPECT_EQ(d.info(5, Phase::kBackward, kEmbed).available, (pc::ParamCount{1, 1000}));
}

TEST(Coordinator, GathersPerPhaseAndKindTable) {
  // Iteration #2 (COMPLETE) of the toy model: (count, numel) of gathers per phase and kind for
  // buckets 1e9 / 150 / 0 and reuse distances 1e9 / 0. No persistent parameters.
  //
  // bucket 1e9: root's round pops the whole queue (one gather of all 1440) and sets "most
  //   recent step fetched for" of every param to its last use, so releases wait for the last
  //   use whatever the reuse distance: backward gathers nothing.
  // bucket 150, reuse 1e9: rounds {p0} 1000, {p1,p2,p3} 210, {p4..p7} 220, {p8} 10 (see
  //   PrefetchRoundsOvershootByAtMostOneParameter); nothing is released before its last use.
  // bucket 150, reuse 0:
  //   step 0 root {p0} 1000; step 1 embed {p1,p2,p3} 210; embed's release frees p0 (its most
  //   recent step is 1 <= 2 and nothing is scanned); step 2 block0 {p4..p7} 220; step 3 fc1
  //   pops p8 (10) and p0@8 (released, so selected again: 1010 >= 150): {p0,p8} 1010;
  //   fc1's release frees p1, p2 (most recent 3 <= 4); step 4 fc2 pops p0@10..p4@15 for free
  //   (in flight or available, each raising "most recent" to its backward step) and selects
  //   p1@16, p2@16 again: {p1,p2} 110, queue empty. From then on every param's most recent
  //   step is its backward use, so nothing is released before it: 5 forward gathers, 2550;
  //   backward none.
  // bucket 0: on demand only; reuse 1e9 keeps everything (forward 5 gathers, 1440: p0 once);
  //   reuse 0 frees after every module (each pass 6 gathers, 2440: p0 twice).
  struct Row {
    std::int64_t bucket;
    std::int64_t reuse;
    std::pair<int, std::int64_t> fwd_prefetch, fwd_on_demand, bwd_prefetch, bwd_on_demand;
  };
  const std::pair<int, std::int64_t> none{0, 0};
  const std::vector<Row> rows{
      {kHuge, kHuge, {1, 1440}, none, none, none},
      {kHuge, 0, {1, 1440}, none, none, none},
      {150, kHuge, {4, 1440}, none, none, none},
      {150, 0, {5, 2550}, none, none, none},
      {0, kHuge, none, {5, 1440}, none, none},
      {0, 0, none, {6, 2440}, none, {6, 2440}},
  };
  for (const auto& row : rows) {
    Driver d(toy_model(), config(row.bucket, row.reuse));
    d.iteration();
    d.iteration();
    SCOPED_TRACE("bucket " + std::to_string(row.bucket) + " reuse " + std::to_string(row.reuse));
    EXPECT_EQ(totals(d.gathers(2, Phase::kForward, GatherKind::kPrefetch)), row.fwd_prefetch);
    EXPECT_EQ(totals(d.gathers(2, Phase::kForward, GatherKind::kOnDemand)), row.fwd_on_demand);
    EXPECT_EQ(totals(d.gathers(2, Phase::kBackward, GatherKind::kPrefetch)), row.bwd_prefetch);
    EXPECT_EQ(totals(d.gathers(2, Phase::kBackward, GatherKind::kOnDemand)), row.bwd_on_demand);
    // Every iteration after the first is identical (the trace holds, state resets each
    // forward): #3 gathers exactly what #2 did.
    d.iteration();
    EXPECT_EQ(totals(d.gathers(3)), totals(d.gathers(2)));
  }
}

// DeepSpeed's coordinator host terms from python_function frames: the reader's counts and
// split of a call's own time, and the fit paired with the scenario's calls, on a trace written
// from known terms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/trace_import/coordinator_fit.hpp"
#include "core/trace_import/trace_file.hpp"
#include "core/trace_import/trace_set.hpp"
#include "synthetic_trace.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::SyntheticTrace;

namespace {

const std::string kCoordinator = "site-packages/deepspeed/runtime/zero/partitioned_param_coordinator.py(";
const std::string kPartition = "site-packages/deepspeed/runtime/zero/partition_parameters.py(";
const std::string kOffload = "site-packages/deepspeed/runtime/zero/parameter_offload.py(";

// The terms the trace is written from (us).
constexpr double kFetchCall = 10, kFetchPerParam = 2, kFetchPerInflight = 30, kFetchRound = 60;
constexpr double kGatherCall = 100, kGatherPerParam = 7;
constexpr double kReleaseCall = 12, kReleasePerParam = 1.5, kReleasePerFreed = 60;
constexpr double kLaunch = 5, kBlocked = 50;

// One module's calls per step: its parameters, in-flight waits, rounds (one gather each, of
// `gathered` parameters) and freed parameters.
struct Module {
  int params, waits, rounds, gathered, freed;
};
const std::vector<Module> kModules = {{1, 0, 1, 1, 1}, {2, 1, 0, 0, 2}, {4, 2, 1, 3, 0},
                                      {2, 0, 2, 2, 2}, {3, 3, 0, 0, 3}, {6, 1, 1, 5, 6}};

pc::CoordinatorCallCounts per_iteration() {
  pc::CoordinatorCallCounts c;
  for (const Module& m : kModules) {
    c.fetch_params.push_back(m.params);
    for (int r = 0; r < m.rounds; ++r) c.gather_params.push_back(m.gathered);
    c.release_params.push_back(m.params);
  }
  return c;
}

// `steps` steps of every module's fetch (inside its pre-forward hook) and release; the last
// step leaves the last module out when `short_last_step`.
std::string write_trace(int steps, bool short_last_step) {
  SyntheticTrace t(0, 1);
  double clock = 100;
  for (int step = 1; step <= steps; ++step) {
    const double step_start = clock;
    const std::size_t modules = short_last_step && step == steps ? kModules.size() - 1 : kModules.size();
    for (std::size_t i = 0; i < modules; ++i) {
      const Module& m = kModules[i];
      const double gather_us = kGatherCall + kGatherPerParam * m.gathered + kLaunch;
      const double fetch_own = kFetchCall + kFetchPerParam * m.params + kFetchPerInflight * m.waits + kFetchRound * m.rounds;
      const double blocked = m.waits > 0 ? kBlocked : 0;
      const double fetch_us = fetch_own + m.rounds * gather_us + blocked;
      t.cpu(kOffload + "353): _pre_forward_module_hook", clock, fetch_us + 20, "python_function", {});
      t.cpu(kOffload + "480): pre_sub_module_forward_function", clock + 4, fetch_us + 12, "python_function", {});
      double at = clock + 10;
      t.cpu(kCoordinator + "270): fetch_sub_module", at, fetch_us, "python_function", {});
      double inside = at + 1;
      for (int r = 0; r < m.rounds; ++r) {  // each round: 2 us of its own around one gather
        t.cpu(kCoordinator + "500): __all_gather_params", inside, gather_us + 2, "python_function", {});
        t.cpu(kPartition + "1100): all_gather_coalesced", inside + 1, gather_us, "python_function", {});
        t.cpu("c10d::_allgather_base_", inside + 2, 20, "cpu_op", {});
        t.launch(inside + 3, 1000 + static_cast<std::int64_t>(step * 100 + i * 10 + r));  // inside the c10d call: kept
        t.cpu("cudaLaunchKernel", inside + 1 + gather_us - kLaunch, kLaunch, "cuda_runtime", {});  // the copy-in
        inside += gather_us + 2;
      }
      for (int w = 0; w < m.waits; ++w) {
        t.cpu(kPartition + "1200): wait", inside, 3, "python_function", {});
        inside += 3;
      }
      if (blocked > 0) t.cpu("cudaEventSynchronize", inside, blocked, "cuda_runtime", {});
      clock += fetch_us + 40;
      const double release_us = kReleaseCall + kReleasePerParam * m.params + kReleasePerFreed * m.freed;
      t.cpu(kOffload + "400): _post_forward_module_hook", clock, release_us + 30, "python_function", {});
      t.cpu(kOffload + "490): post_sub_module_forward_function", clock + 18, release_us + 8, "python_function", {});
      t.cpu(kCoordinator + "300): release_sub_module", clock + 20, release_us, "python_function", {});
      for (int f = 0; f < m.freed; ++f) {
        t.cpu(kPartition + "1500): _partition_param", clock + 21 + f * 10, 8, "python_function", {});
      }
      clock += release_us + 60;
    }
    t.step(step, step_start - 10, clock - step_start + 10);
    clock += 100;
  }
  return t.text();
}

pc::TraceSet load(const std::string& text) {
  return pc::match_trace_set({pc::build_rank_timeline(pc::read_trace_text(text, "rank0.json"), 0, {})});
}

double term(const pc::CoordinatorFit& fit, const std::string& name, bool* fitted = nullptr) {
  for (const auto& t : fit.terms) {
    if (t.term == name) {
      if (fitted) *fitted = t.fitted;
      return t.value_us;
    }
  }
  ADD_FAILURE() << name << " not in the fit";
  return -1;
}

}  // namespace

TEST(CoordinatorFit, ReaderCountsWhatEachCallNests) {
  const pc::TraceSet set = load(write_trace(1, false));
  const auto& calls = set.ranks[0].hook_calls;
  std::vector<const pc::HostHookCall*> fetches, releases, gathers, hooks;
  for (const auto& c : calls) {
    if (c.function == "fetch_sub_module") fetches.push_back(&c);
    if (c.function == "release_sub_module") releases.push_back(&c);
    if (c.function == "all_gather_coalesced") gathers.push_back(&c);
    if (c.function == "_post_forward_module_hook") hooks.push_back(&c);
  }
  ASSERT_EQ(fetches.size(), kModules.size());
  ASSERT_EQ(releases.size(), kModules.size());
  ASSERT_EQ(gathers.size(), 5u);
  const pc::HostHookCall& f = *fetches[2];  // module {4, 2, 1, 3, 0}
  EXPECT_EQ(f.gather_rounds, 1);
  EXPECT_EQ(f.handle_waits, 2);
  EXPECT_EQ(f.blocked_ns, 50'000);
  EXPECT_EQ(f.gather_ns, static_cast<std::int64_t>((kGatherCall + kGatherPerParam * 3 + kLaunch) * 1000));
  EXPECT_TRUE(gathers.front()->in_fetch);
  EXPECT_EQ(gathers.front()->launch_ns, 5'000);  // the copy-in only: the launch inside c10d stays
  EXPECT_EQ(releases[5]->partitioned_params, 6);
  EXPECT_EQ(hooks[0]->hook_function_ns, static_cast<std::int64_t>((kReleaseCall + 1.5 + 60 + 8) * 1000));
}

TEST(CoordinatorFit, RecoversTheTermsAFetchReleaseAndGatherWereWrittenFrom) {
  const pc::CoordinatorFit fit = pc::fit_coordinator_terms(load(write_trace(3, true)), per_iteration(), {}, 0);
  EXPECT_EQ(fit.steps_paired, 2);
  ASSERT_EQ(fit.terms.size(), 9u);
  EXPECT_NEAR(term(fit, "host_fetch_call_us"), kFetchCall, 1e-3);
  EXPECT_NEAR(term(fit, "host_fetch_per_param_us"), kFetchPerParam, 1e-3);
  EXPECT_NEAR(term(fit, "host_fetch_per_inflight_param_us"), kFetchPerInflight, 1e-3);
  EXPECT_NEAR(term(fit, "host_fetch_gather_round_us"), kFetchRound, 1e-3);
  EXPECT_NEAR(term(fit, "host_allgather_call_us"), kGatherCall, 1e-3);
  EXPECT_NEAR(term(fit, "host_allgather_per_param_us"), kGatherPerParam, 1e-3);
  EXPECT_NEAR(term(fit, "host_release_call_us"), kReleaseCall, 1e-3);
  EXPECT_NEAR(term(fit, "host_release_per_param_us"), kReleasePerParam, 1e-3);
  EXPECT_NEAR(term(fit, "host_release_per_freed_param_us"), kReleasePerFreed, 1e-3);
  // The short step is named, not paired.
  ASSERT_FALSE(fit.not_fitted.empty());
  EXPECT_NE(fit.not_fitted.front().find("rank 0 step 3 has 5 fetch_sub_module"), std::string::npos)
      << fit.not_fitted.front();
  // At a fitted host_speed of 2, the terms at host_speed 1 are twice the traced times.
  const pc::CoordinatorFit fast = pc::fit_coordinator_terms(load(write_trace(2, false)), per_iteration(), {}, 2.0);
  EXPECT_NEAR(term(fast, "host_release_per_freed_param_us"), 2 * kReleasePerFreed, 1e-3);
}

TEST(CoordinatorFit, ACountThatNeverVariesIsHeldAtTheBase) {
  pc::CoordinatorCallCounts counts = per_iteration();
  for (auto& g : counts.gather_params) g = 2;  // as if every gather had 2 parameters
  pc::CalibrationConstants base;
  base.host_allgather_per_param_ns = 4'000;
  const pc::CoordinatorFit fit = pc::fit_coordinator_terms(load(write_trace(2, false)), counts, base, 0);
  bool fitted = true;
  EXPECT_DOUBLE_EQ(term(fit, "host_allgather_per_param_us", &fitted), 4.0);
  EXPECT_FALSE(fitted);
  for (const auto& t : fit.terms) {
    if (t.term == "host_allgather_per_param_us") {
      EXPECT_NE(t.why_not.find("held at the base's 4.0 us: every paired call had 2"), std::string::npos) << t.why_not;
    }
  }
  // Nothing pairs with a scenario of other modules: no terms, and the first mismatch named.
  pc::CoordinatorCallCounts other = per_iteration();
  other.fetch_params.pop_back();
  const pc::CoordinatorFit none = pc::fit_coordinator_terms(load(write_trace(2, false)), other, base, 0);
  EXPECT_TRUE(none.terms.empty());
  ASSERT_FALSE(none.not_fitted.empty());
  EXPECT_NE(none.not_fitted.front().find("the scenario makes 5, 5, 6 and 0 per iteration"), std::string::npos)
      << none.not_fitted.front();
}

// MoE routing in the simulator (issue 23): an expert that gets no tokens does not run, so its
// hooks and all-gathers do not happen, DeepSpeed's trace is invalidated and re-recorded at a
// cost; with the MoE block as a ZeRO-3 leaf module none of that happens.
#include <gtest/gtest.h>

#include "core/scenario/expert_routing.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;

namespace {

pc::Scenario scenario(const std::string& file, std::vector<std::string> overrides = {}) {
  static const std::vector<std::string> kShort = {"output.trace=false", "output.memory_timeline=false",
                                                  "training.iterations=5"};
  overrides.insert(overrides.end(), kShort.begin(), kShort.end());
  return pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/moe/" + file, overrides,
                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

ps::WorldResult simulate(const pc::Scenario& s) {
  ps::World world(s, /*record_trace=*/false);
  return world.run();
}

}  // namespace

TEST(MoeSimulation, IdleExpertsInvalidateTheTraceAndTheLeafModuleRemovesIt) {
  const auto plain_scenario = scenario("mixtral-8x7b-2-nodes.yaml");
  const auto plain = simulate(plain_scenario);
  ASSERT_EQ(plain.status, pc::RunStatus::kOk) << plain.message;
  const auto plain_stats = pc::summarize(plain.metrics, 2);
  ASSERT_TRUE(plain_stats.trace_invalidations);
  EXPECT_GT(plain_stats.trace_invalidations->total, 0);
  EXPECT_GT(plain_stats.trace_invalidations->per_iteration, 0.0);
  EXPECT_GT(plain_stats.trace_invalidations->mean_cost_ns, 0);
  // An iteration that invalidated is followed by one that records again.
  for (std::size_t i = 0; i + 1 < plain.metrics.iterations.size(); ++i) {
    if (plain.metrics.iterations[i].trace_invalidations > 0) {
      EXPECT_EQ(plain.metrics.iterations[i + 1].trace_mode, pc::TraceMode::kRecord);
    }
  }

  const auto leaf = simulate(scenario("mixtral-8x7b-2-nodes-leaf.yaml"));
  ASSERT_EQ(leaf.status, pc::RunStatus::kOk) << leaf.message;
  const auto leaf_stats = pc::summarize(leaf.metrics, 2);
  ASSERT_TRUE(leaf_stats.trace_invalidations);
  EXPECT_EQ(leaf_stats.trace_invalidations->total, 0);
  EXPECT_EQ(leaf_stats.trace_invalidations->mean_cost_ns, 0);
  for (const auto& it : leaf.metrics.iterations) {
    if (it.iteration > 1) {
      EXPECT_EQ(it.trace_mode, pc::TraceMode::kComplete);
    }
  }
  // All experts of a block are gathered together: more gathered memory at once.
  EXPECT_GT(leaf_stats.peak_gathered_param_bytes, plain_stats.peak_gathered_param_bytes);
}

TEST(MoeSimulation, ExpertsWithoutTokensGatherNothing) {
  // Uniform routing of 512 tokens leaves no expert idle: no invalidation, and every expert's
  // parameters are gathered; the skewed router skips idle experts' all-gathers.
  const auto uniform = simulate(scenario("mixtral-8x7b-2-nodes.yaml", {"moe={routing: uniform}"}));
  ASSERT_EQ(uniform.status, pc::RunStatus::kOk) << uniform.message;
  EXPECT_EQ(pc::summarize(uniform.metrics, 2).trace_invalidations->total, 0);

  const auto skewed_scenario = scenario("mixtral-8x7b-2-nodes.yaml");
  const auto skewed = simulate(skewed_scenario);
  ASSERT_EQ(skewed.status, pc::RunStatus::kOk);
  // Iteration 1 records on both: the skewed one gathers less by exactly the idle experts' params.
  const pc::ExpertRouting routing(skewed_scenario);
  std::vector<std::int64_t> tokens;
  routing.route(1, 0, tokens);
  std::int64_t idle_numel = 0;
  for (std::size_t m = 0; m < tokens.size(); ++m) {
    if (tokens[m] != 0) continue;
    for (const int p : skewed_scenario.model.modules[m].param_ids) {
      idle_numel += skewed_scenario.model.params[static_cast<std::size_t>(p)].numel;
    }
  }
  ASSERT_GT(idle_numel, 0);
  EXPECT_LT(skewed.metrics.iterations[0].gathered_numel, uniform.metrics.iterations[0].gathered_numel);
  EXPECT_LT(skewed.metrics.iterations[0].all_gather_count, uniform.metrics.iterations[0].all_gather_count);
}

TEST(MoeSimulation, RanksRoutingTheirOwnDataStopAtTheMismatchedAllGather) {
  // DeepSpeed issue #4808: ranks whose experts differ issue different all-gathers and hang; the
  // simulator stops there and says so. The leaf module keeps their collectives matched.
  const auto own = simulate(scenario("mixtral-8x7b-2-nodes.yaml", {"moe.ranks=own"}));
  EXPECT_EQ(own.status, pc::RunStatus::kCollectiveMismatch);
  EXPECT_NE(own.message.find("experts"), std::string::npos) << own.message;
  const auto leaf = simulate(scenario("mixtral-8x7b-2-nodes-leaf.yaml", {"moe.ranks=own"}));
  EXPECT_EQ(leaf.status, pc::RunStatus::kOk) << leaf.message;
}

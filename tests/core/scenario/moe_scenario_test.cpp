// The `moe:` section and zero.leaf_modules: what they read, what they do to the module tree,
// the routing they imply, and their errors (file, line, key, expected form).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/cli_runner.hpp"
#include "core/scenario/expert_routing.hpp"
#include "core/scenario/scenario.hpp"

namespace pc = prefetchlab::core;
using prefetchlab::testing::TempDir;

namespace {

const pc::BundledData kBundled = pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR);

pc::Scenario bundled(const std::string& file, const std::vector<std::string>& overrides = {}) {
  return pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/moe/" + file, overrides, kBundled);
}

pc::Scenario load(const std::string& text) {
  TempDir dir("moe-scenario");
  return pc::load_scenario(dir.write("s.yaml", text), {}, kBundled);
}

const std::string kMixtral = "model: " + std::string(PREFETCHLAB_SOURCE_DIR) +
                             "/models/hf/mixtral-8x7b-v0.1.json\n"
                             "training: {micro_batch: 1, seq_len: 512}\n"
                             "cluster: {hardware: h100-sxm-8x}\n";

void expect_error(const std::string& text, const std::string& key, int line) {
  try {
    load(text);
    FAIL() << "expected an InputError for " << key;
  } catch (const pc::InputError& e) {
    EXPECT_EQ(e.key(), key);
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

}  // namespace

TEST(MoeScenario, ReadsTheRouterAndTopKFromTheModel) {
  const auto s = bundled("mixtral-8x7b-2-nodes.yaml");
  ASSERT_TRUE(s.moe.enabled);
  EXPECT_EQ(s.moe.routing, pc::MoeRouting::kZipf);
  EXPECT_DOUBLE_EQ(s.moe.zipf_exponent, 3.5);
  EXPECT_DOUBLE_EQ(s.moe.capacity_factor, 2.0);
  EXPECT_EQ(s.moe.ranks, pc::MoeRankRouting::kSame);
  EXPECT_EQ(s.model.experts_per_token, 2);
  EXPECT_EQ(s.cluster.world_size(), 16);
  const auto layers = pc::moe_layers(s.model);
  ASSERT_EQ(layers.size(), 32u);
  EXPECT_EQ(layers[0].experts.size(), 8u);
  EXPECT_EQ(s.model.modules[static_cast<std::size_t>(layers[0].experts[3])].name,
            "model.layers.0.block_sparse_moe.experts.3");
}

TEST(MoeScenario, LeafModuleTakesItsSubtreesParametersAndItsExpertsLoseTheirHooks) {
  const auto plain = bundled("mixtral-8x7b-2-nodes.yaml");
  const auto leaf = bundled("mixtral-8x7b-2-nodes-leaf.yaml");
  EXPECT_EQ(leaf.leaf_modules, std::vector<std::string>{"MixtralSparseMoeBlock"});
  const auto layer = pc::moe_layers(leaf.model)[0];
  const auto& block = leaf.model.modules[static_cast<std::size_t>(layer.block)];
  EXPECT_TRUE(block.z3_leaf);
  EXPECT_TRUE(block.z3_hooks);
  std::int64_t leaf_numel = 0;
  for (const int p : block.param_ids) leaf_numel += leaf.model.params[static_cast<std::size_t>(p)].numel;
  // gate 4096x8 + 8 experts x 3 x 4096x14336.
  EXPECT_EQ(leaf_numel, 4096 * 8 + 8LL * 3 * 4096 * 14336);
  for (std::size_t m = static_cast<std::size_t>(layer.block) + 1; m < leaf.model.modules.size(); ++m) {
    const auto& spec = leaf.model.modules[m];
    if (!spec.name.starts_with(block.name + ".")) break;
    EXPECT_FALSE(spec.z3_hooks) << spec.name;
    EXPECT_TRUE(spec.param_ids.empty()) << spec.name;
  }
  // Without the leaf every expert keeps its own hooks and parameters.
  const auto& expert = plain.model.modules[static_cast<std::size_t>(pc::moe_layers(plain.model)[0].experts[0]) + 1];
  EXPECT_TRUE(expert.z3_hooks);
  EXPECT_FALSE(expert.param_ids.empty());
  EXPECT_EQ(leaf.model.total_numel(), plain.model.total_numel());
}

TEST(MoeScenario, RoutingIsSeededSameOnEveryRankOrOwnPerRank) {
  const auto same = bundled("mixtral-8x7b-2-nodes.yaml");
  const pc::ExpertRouting routing(same);
  std::vector<std::int64_t> a, b, c;
  routing.route(2, 0, a);
  routing.route(2, 5, b);
  EXPECT_EQ(a, b);
  pc::ExpertRouting(same).route(2, 0, c);
  EXPECT_EQ(a, c);  // a pure function of (scenario, seed)
  routing.route(3, 0, c);
  EXPECT_NE(a, c);
  // Expert modules carry their tokens, the rest -1; some expert of some layer gets none.
  const auto layer = routing.layers()[0];
  std::int64_t routed = 0;
  for (const int e : layer.experts) routed += a[static_cast<std::size_t>(e)];
  EXPECT_LE(routed, 512 * 2);
  EXPECT_EQ(a[static_cast<std::size_t>(layer.block)], -1);
  EXPECT_NE(std::count(a.begin(), a.end(), 0), 0);

  const auto own = bundled("mixtral-8x7b-2-nodes.yaml", {"moe.ranks=own"});
  const pc::ExpertRouting per_rank(own);
  per_rank.route(2, 0, a);
  per_rank.route(2, 5, b);
  EXPECT_NE(a, b);
}

TEST(MoeScenario, BadInputsNameFileLineAndKey) {
  expect_error(kMixtral + "moe: {routing: zipf}\n", "moe.zipf_exponent", 4);
  expect_error(kMixtral + "moe: {routing: skewed}\n", "moe.routing", 4);
  expect_error(kMixtral + "moe:\n  routing: uniform\n  top_k: 3\n", "moe.top_k", 6);
  expect_error(kMixtral + "moe:\n  routing: uniform\n  capacity_factor: 0\n", "moe.capacity_factor", 6);
  expect_error(kMixtral + "moe:\n  routing: uniform\n  ranks: some\n", "moe.ranks", 6);
  expect_error(kMixtral + "zero:\n  leaf_modules: [MixtralSparseMoe]\n", "zero.leaf_modules", 5);
  expect_error(kMixtral + "zero:\n  leaf_modules: MixtralSparseMoeBlock\n", "zero.leaf_modules", 5);
  expect_error("model: gpt2-small\ntraining: {micro_batch: 1, seq_len: 512}\ncluster: {hardware: h100-sxm-8x}\n"
               "moe:\n  routing: uniform\n",
               "moe", 4);
}

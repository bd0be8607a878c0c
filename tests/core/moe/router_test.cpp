// The MoE router's load: deterministic for a seed, balanced when uniform, skewed by Zipf,
// capped by the capacity factor.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "core/moe/router.hpp"
#include "core/scenario/random_stream.hpp"

namespace pc = prefetchlab::core;

namespace {

std::vector<int> identity(int n) {
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

pc::ExpertLoad route(const pc::RouterSpec& spec, std::uint64_t seed, const std::vector<int>& popularity) {
  pc::RandomStream stream(seed, "test");
  return pc::route_micro_batch(spec, popularity, [&stream] { return stream.uniform(); });
}

pc::RouterSpec spec(pc::MoeRouting routing, double exponent, double capacity) {
  return {.tokens = 4096, .experts = 8, .top_k = 2, .routing = routing, .zipf_exponent = exponent,
          .capacity_factor = capacity};
}

std::int64_t sum(const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); }

}  // namespace

TEST(Router, SameSeedSameLoadOtherSeedOtherLoad) {
  const auto s = spec(pc::MoeRouting::kZipf, 1.2, 0);
  EXPECT_EQ(route(s, 7, identity(8)).tokens, route(s, 7, identity(8)).tokens);
  EXPECT_NE(route(s, 7, identity(8)).tokens, route(s, 8, identity(8)).tokens);
}

TEST(Router, EveryTokenGoesToTopKDistinctExpertsWithoutCapacity) {
  for (const auto routing : {pc::MoeRouting::kUniform, pc::MoeRouting::kZipf}) {
    const auto load = route(spec(routing, 2.0, 0), 1, identity(8));
    EXPECT_EQ(sum(load.tokens), 4096 * 2);
    EXPECT_EQ(load.dropped_tokens, 0);
    // Distinct experts per token: no expert gets more tokens than there are.
    for (const auto n : load.tokens) EXPECT_LE(n, 4096);
  }
}

TEST(Router, UniformIsBalancedZipfIsSkewedTowardsThePopularExperts) {
  const auto uniform = route(spec(pc::MoeRouting::kUniform, 0, 0), 3, identity(8));
  for (const auto n : uniform.tokens) EXPECT_NEAR(static_cast<double>(n), 1024.0, 150.0);
  // Popularity order 7, 6, ..., 0: expert 7 is the favourite, expert 0 the least liked.
  std::vector<int> reversed = identity(8);
  std::reverse(reversed.begin(), reversed.end());
  const auto zipf = route(spec(pc::MoeRouting::kZipf, 1.2, 0), 3, reversed);
  EXPECT_GT(zipf.tokens[7], 2 * zipf.tokens[0]);
  EXPECT_GT(zipf.tokens[7], 1500);
  EXPECT_EQ(*std::max_element(zipf.tokens.begin(), zipf.tokens.end()), zipf.tokens[7]);
}

TEST(Router, StrongSkewLeavesSomeExpertsWithoutTokens) {
  pc::RouterSpec s = spec(pc::MoeRouting::kZipf, 4.0, 0);
  s.tokens = 256;
  int layers_with_idle_expert = 0;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const auto load = route(s, seed, identity(8));
    layers_with_idle_expert += std::count(load.tokens.begin(), load.tokens.end(), 0) > 0 ? 1 : 0;
  }
  EXPECT_GT(layers_with_idle_expert, 5);
  EXPECT_LT(layers_with_idle_expert, 50);
}

TEST(Router, CapacityFactorDropsTheTokensOverCapacity) {
  const auto s = spec(pc::MoeRouting::kZipf, 1.5, 1.25);
  EXPECT_EQ(pc::expert_capacity_tokens(s), 1280);  // ceil(1.25 * 4096 * 2 / 8)
  const auto capped = route(s, 5, identity(8));
  const auto free = route(spec(pc::MoeRouting::kZipf, 1.5, 0), 5, identity(8));
  EXPECT_GT(capped.dropped_tokens, 0);
  EXPECT_EQ(sum(capped.tokens) + capped.dropped_tokens, 4096 * 2);
  for (std::size_t e = 0; e < 8; ++e) EXPECT_EQ(capped.tokens[e], std::min<std::int64_t>(free.tokens[e], 1280));
}

TEST(Router, BadSpecsThrow) {
  auto s = spec(pc::MoeRouting::kUniform, 0, 0);
  s.top_k = 9;
  EXPECT_THROW(route(s, 1, identity(8)), std::invalid_argument);
  s.top_k = 0;
  EXPECT_THROW(route(s, 1, identity(8)), std::invalid_argument);
  s.top_k = 2;
  EXPECT_THROW(route(s, 1, identity(7)), std::invalid_argument);
}

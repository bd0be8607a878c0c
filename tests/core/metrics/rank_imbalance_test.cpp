// core::median_rank_imbalance: the busiest rank over the ranks' mean, per steady iteration.
#include <gtest/gtest.h>

#include <vector>

#include "core/metrics/rank_imbalance.hpp"

namespace pc = prefetchlab::core;

TEST(RankImbalance, MedianOverSteadyIterationsOfBusiestOverMean) {
  // Iteration 1 is warm-up (a huge imbalance there must not count). Iteration 2: 10 and 14 ms
  // over two spans on rank 1 -> 14 / 12 - 1; iteration 3: equal; iteration 4: 9 and 11 ->
  // 11 / 10 - 1. Median of {1/6, 0, 0.1} = 0.1.
  const std::vector<pc::RankIterationCompute> c{
      {0, 1, 1'000}, {1, 1, 50'000},                 //
      {0, 2, 10'000}, {1, 2, 6'000}, {1, 2, 8'000},  //
      {0, 3, 7'000}, {1, 3, 7'000},                  //
      {0, 4, 9'000}, {1, 4, 11'000}};
  EXPECT_NEAR(pc::median_rank_imbalance(c, 2, 1), 0.1, 1e-12);
  // With the warm-up counted the median of {49/25.5... , 1/6, 0, 0.1} moves.
  EXPECT_GT(pc::median_rank_imbalance(c, 2, 0), 0.1);
}

TEST(RankImbalance, IterationsMissingARankAreSkippedAndNothingGivesZero) {
  const std::vector<pc::RankIterationCompute> c{{0, 2, 10'000}, {0, 3, 10'000}, {1, 3, 30'000}};
  EXPECT_NEAR(pc::median_rank_imbalance(c, 2, 1), 0.5, 1e-12);  // only iteration 3 has both ranks
  EXPECT_EQ(pc::median_rank_imbalance({}, 2, 1), 0.0);
}

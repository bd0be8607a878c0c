// The ranks' common clock (gpu_backend/executor/clock_consensus.hpp): built from exit times with known
// delays, the shift must recover how late each rank's clock origin was, and ignore a late exit
// in a later round.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "gpu_backend/executor/clock_consensus.hpp"

namespace pg = prefetchlab::gpu;

namespace {

// x[r][k] = T_k - T_0 + d[r][k] - d[r][0]: what rank r measures, given the true exit instants
// T_k (common) and each rank's recording delay d[r][k].
std::vector<double> exits_since_first(const std::vector<double>& true_exit_ns,
                                      const std::vector<std::vector<double>>& delay_ns) {
  std::vector<double> x;
  for (const auto& d : delay_ns) {
    for (std::size_t k = 0; k < true_exit_ns.size(); ++k) x.push_back(true_exit_ns[k] - true_exit_ns[0] + d[k] - d[0]);
  }
  return x;
}

}  // namespace

TEST(ClockConsensus, RecoversALateClockOriginAndIgnoresOneLateLaterExit) {
  const std::vector<double> t{0, 50'000, 90'000, 160'000, 200'000};
  // Rank 1's first exit was recorded 3 ms late (its whole trace would sit 3 ms early); rank 0's
  // third exit was late too, which must not move anything; small jitter everywhere.
  const std::vector<std::vector<double>> d{{10, 20, 2'000'000, 15, 12}, {3'000'000, 30, 25, 10, 18}};
  const auto x = exits_since_first(t, d);
  const std::int64_t shift0 = pg::consensus_clock_shift_ns(x, 2, 5, 0);
  const std::int64_t shift1 = pg::consensus_clock_shift_ns(x, 2, 5, 1);
  // Aligned time = measured - shift: rank 1's origin moves 3 ms later relative to rank 0's.
  EXPECT_NEAR(static_cast<double>(shift0 - shift1), 3'000'000.0, 30.0);
  // Against the ranks' mean: each origin's error splits the 3 ms.
  EXPECT_NEAR(static_cast<double>(shift0), 1'500'000.0, 30.0);
  EXPECT_NEAR(static_cast<double>(shift1), -1'500'000.0, 30.0);
  // The true instants line up after the shift: rank r's exit k is at T_k - T_0 - mean(d[.][0]).
  for (int k = 1; k < 5; ++k) {
    const double aligned0 = x[static_cast<std::size_t>(k)] - static_cast<double>(shift0);
    const double aligned1 = x[static_cast<std::size_t>(5 + k)] - static_cast<double>(shift1);
    if (k != 2) {
      EXPECT_NEAR(aligned0, aligned1, 50.0) << "round " << k;
    }
  }
}

TEST(ClockConsensus, AgreeingRanksNeedNoShiftAndBadShapesAreRejected) {
  const std::vector<double> t{0, 10'000, 20'000};
  const auto x = exits_since_first(t, {{5, 5, 5}, {5, 5, 5}, {5, 5, 5}});
  for (int r = 0; r < 3; ++r) EXPECT_EQ(pg::consensus_clock_shift_ns(x, 3, 3, r), 0);
  EXPECT_THROW(pg::consensus_clock_shift_ns(x, 3, 2, 0), std::invalid_argument);
  EXPECT_THROW(pg::consensus_clock_shift_ns(x, 3, 3, 3), std::invalid_argument);
  EXPECT_THROW(pg::consensus_clock_shift_ns(x, 3, 1, 0), std::invalid_argument);
}

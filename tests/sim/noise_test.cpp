// Seeded noise: named random streams are reproducible and independent, and the scenario's
// noise knobs change exactly what they say (which ranks, which timings).
#include <gtest/gtest.h>

#include <cmath>

#include "core/scenario/random_stream.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;

TEST(RandomStream, SameSeedAndNameRepeatOtherNamesDiffer) {
  pc::RandomStream a(7, "compute/rank0"), b(7, "compute/rank0"), c(7, "compute/rank1"), d(8, "compute/rank0");
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
    EXPECT_NE(x, d.next_u64());
  }
}

TEST(RandomStream, UniformAndNormalHaveTheRightMoments) {
  pc::RandomStream r(1, "moments");
  double sum = 0, sum_sq = 0, usum = 0;
  constexpr int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    usum += u;
    const double z = r.normal();
    sum += z;
    sum_sq += z * z;
  }
  EXPECT_NEAR(usum / n, 0.5, 0.005);
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.02);
}

namespace {

pc::Scenario tiny(const std::vector<std::string>& extra) {
  // Built by insert, not push_back of a temporary: GCC 12 warns falsely (-Warray-bounds) on the
  // inlined move of a short string literal's std::string here.
  std::vector<std::string> overrides{"output.trace=false"};
  overrides.insert(overrides.begin(), extra.begin(), extra.end());
  return pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/tiny-llama-2x-h100.yaml", overrides,
                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

ps::WorldResult simulate(const pc::Scenario& s) {
  ps::World world(s, false);
  return world.run();
}

}  // namespace

TEST(Noise, SlowRankSetsThePace) {
  // Compute slowed 1000x so that kernels set the pace: at DeepSpeed's host costs the tiny run is
  // host-bound, and a slower GPU behind a busy host changes nothing.
  const std::string slow_compute = "cluster.calibration.compute_time_scale=1000";
  const auto base = simulate(tiny({slow_compute}));
  const auto slow = simulate(tiny({"noise.slow_ranks={1: 1.5}", slow_compute}));
  EXPECT_GT(slow.metrics.iterations.back().step_time_ns, base.metrics.iterations.back().step_time_ns);
  EXPECT_GT(slow.metrics.iterations.back().compute_ns, base.metrics.iterations.back().compute_ns);
}

TEST(Noise, ComputeJitterMakesRanksDifferButStaysReproducible) {
  // Slow compute down 1000x so that kernels, not host overheads, set the intervals.
  const std::string slow_compute = "cluster.calibration.compute_time_scale=1000";
  const auto a = simulate(tiny({"noise.compute_jitter=0.05", "noise.seed=11", slow_compute}));
  const auto b = simulate(tiny({"noise.compute_jitter=0.05", "noise.seed=11", slow_compute}));
  const auto c = simulate(tiny({"noise.compute_jitter=0.05", "noise.seed=12", slow_compute}));
  ASSERT_EQ(a.metrics.samples.size(), b.metrics.samples.size());
  bool ranks_differ = false;
  for (std::size_t i = 0; i < a.metrics.samples.size(); ++i) {
    EXPECT_EQ(a.metrics.samples[i].interval_ns, b.metrics.samples[i].interval_ns);
  }
  // Sample k of rank 0 vs sample k of rank 1 within the same iteration.
  const std::size_t per_rank = a.metrics.samples.size() / 6 / 2;
  for (std::size_t k = 0; k < per_rank; ++k) {
    ranks_differ = ranks_differ || a.metrics.samples[k].interval_ns != a.metrics.samples[per_rank + k].interval_ns;
  }
  EXPECT_TRUE(ranks_differ);
  EXPECT_NE(a.metrics.iterations.back().step_time_ns, c.metrics.iterations.back().step_time_ns);
}

TEST(Noise, HostTimerNoiseChangesOnlyWhatHostTimersRead) {
  const auto quiet = simulate(tiny({}));
  const auto noisy = simulate(tiny({"noise.host_timer_noise_us=50"}));
  ASSERT_EQ(quiet.metrics.samples.size(), noisy.metrics.samples.size());
  bool host_differs = false;
  for (std::size_t i = 0; i < quiet.metrics.samples.size(); ++i) {
    EXPECT_EQ(quiet.metrics.samples[i].wait_ns, noisy.metrics.samples[i].wait_ns);  // device events
    host_differs = host_differs || quiet.metrics.samples[i].extra[0] != noisy.metrics.samples[i].extra[0];
  }
  EXPECT_TRUE(host_differs);
  EXPECT_EQ(quiet.metrics.iterations.back().step_time_ns, noisy.metrics.iterations.back().step_time_ns);
}

TEST(Noise, BadNoiseKeysAreInputErrors) {
  EXPECT_THROW(tiny({"noise.slow_ranks={5: 1.2}"}), pc::InputError);  // only ranks 0-1 exist
  EXPECT_THROW(tiny({"noise.slow_ranks={1: 0.5}"}), pc::InputError);  // factor < 1
  EXPECT_THROW(tiny({"noise.compute_jiter=0.1"}), pc::InputError);
}

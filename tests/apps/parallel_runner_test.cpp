// The sweep's and tune's workers (apps/parallel_runner.hpp): scenarios loaded and simulated on
// several threads at once give the results of one thread, and a failure is the lowest index's
// whatever the timing. Under TSan (tests/sanitize.sh) this is the check that simulations share
// no unsynchronised state.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/parallel_runner.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"

namespace pa = prefetchlab::apps;
namespace pc = prefetchlab::core;

namespace {

// Steady step time of one point of a small bucket-size sweep.
std::int64_t simulate(std::size_t point) {
  const std::string root = PREFETCHLAB_SOURCE_DIR;
  const pc::Scenario s = pc::load_scenario(
      root + "/scenarios/tiny-llama-2x-h100.yaml",
      {"training.iterations=3", "output.trace=false", "zero.stage3_prefetch_bucket_size=" + std::to_string((point + 1) * 100000)},
      pc::BundledData::from_root(root));
  prefetchlab::sim::World world(s, /*record_trace=*/false);
  const auto result = world.run();
  if (result.status != pc::RunStatus::kOk || result.metrics.iterations.empty()) throw std::runtime_error(result.message);
  return result.metrics.iterations.back().step_time_ns;
}

}  // namespace

TEST(ParallelRunner, SimulationsOnSeveralThreadsMatchOneThread) {
  constexpr std::size_t kPoints = 6;
  std::vector<std::int64_t> serial(kPoints), parallel(kPoints);
  std::atomic<bool> stop{false};
  pa::parallel_for(kPoints, 1, stop, [&](std::size_t i) { serial[i] = simulate(i); });
  pa::parallel_for(kPoints, 3, stop, [&](std::size_t i) { parallel[i] = simulate(i); });
  EXPECT_EQ(parallel, serial);
  EXPECT_GT(serial.front(), 0);
}

TEST(ParallelRunner, TheLowestFailingIndexIsRethrownAfterAllJoin) {
  for (unsigned threads : {1u, 2u, 4u}) {
    std::atomic<bool> stop{false};
    try {
      pa::parallel_for(64, threads, stop, [&](std::size_t i) {
        if (i == 5 || i == 9) throw std::runtime_error("point " + std::to_string(i));
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "point 5") << threads << " threads";
    }
    EXPECT_TRUE(stop.load());
  }
  EXPECT_EQ(pa::thread_count(8, 3), 3u);
  EXPECT_EQ(pa::thread_count(2, 0), 1u);
}

// The default thread count is the CPUs this thread may run on, not every core of the machine.
TEST(ParallelRunner, DefaultThreadsFollowTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &saved)) ++first_cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first_cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const unsigned confined = pa::available_cpus();
  const unsigned threads = pa::thread_count(0, 100);
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(confined, 1u);
  EXPECT_EQ(threads, 1u);
  EXPECT_EQ(pa::available_cpus(), static_cast<unsigned>(CPU_COUNT(&saved)));
  EXPECT_EQ(pa::thread_count(0, 1), 1u);
}

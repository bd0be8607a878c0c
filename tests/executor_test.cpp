// gpu::Executor on the host-thread device (issue 7): gathered parameters are bit-identical to the
// unsharded originals, reduced gradient partitions equal an unsharded reference, the host blocks
// only where DeepSpeed's does, and runs with a static controller are deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "core/scenario.hpp"
#include "forwarding_device.hpp"
#include "gpu_backend/executor.hpp"
#include "gpu_backend/host_device.hpp"
#include "gpu_backend/seeded_data.hpp"
#include "sim/world.hpp"

namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;
namespace pt = prefetchlab::testing;

namespace {

pc::Scenario host_scenario(int world, std::vector<std::string> overrides = {}) {
  overrides.push_back("cluster.gpus_per_node=" + std::to_string(world));
  overrides.push_back("output.trace=false");
  return pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/host/tiny-llama-host.yaml", overrides,
                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

pg::HostDeviceOptions device_options(const pc::Scenario& s) {
  pg::HostDeviceOptions o;
  o.world_size = static_cast<int>(s.cluster.world_size());
  o.capacity_bytes = static_cast<std::uint64_t>(s.cluster.hardware.gpu.memory_bytes);
  o.allocator = s.memory.allocator;
  o.collective_timeout = std::chrono::milliseconds(20'000);
  return o;
}

struct Mismatches {
  std::mutex mutex;
  std::vector<std::string> lines;
  int checks = 0;
  void add(std::string line) {
    std::lock_guard lock(mutex);
    if (lines.size() < 20) lines.push_back(std::move(line));
  }
  void count() {
    std::lock_guard lock(mutex);
    ++checks;
  }
};

// The unsharded reference gradient of `param` averaged over ranks (research §2: grads are
// divided by W before the reduce-scatter), from the same numbers the ranks computed with.
struct RankData {
  std::vector<double> x, dy;  // activations and upstream gradients as the rank holds them
};

std::vector<double> reference_gradient(const pc::ModelSpec& model, int param, const std::vector<double>& original,
                                       const pg::ExecutorGeometry& geometry, const std::vector<RankData>& ranks,
                                       int uses) {
  const int world = static_cast<int>(ranks.size());
  const auto& spec = model.params[static_cast<std::size_t>(param)];
  std::vector<double> total(static_cast<std::size_t>(spec.numel), 0.0);
  for (int r = 0; r < world; ++r) {
    const auto& x = ranks[static_cast<std::size_t>(r)].x;
    const auto& dy = ranks[static_cast<std::size_t>(r)].dy;
    if (spec.gemm_in > 0) {
      for (std::int64_t i = 0; i < spec.gemm_in; ++i) {
        for (std::int64_t j = 0; j < spec.gemm_out; ++j) {
          double sum = 0;
          for (std::int64_t t = 0; t < geometry.tokens; ++t) {
            sum += x[static_cast<std::size_t>(t * geometry.max_dim + i)] * dy[static_cast<std::size_t>(t * geometry.max_dim + j)];
          }
          total[static_cast<std::size_t>(i * spec.gemm_out + j)] += uses * sum;
        }
      }
    } else {
      for (std::int64_t i = 0; i < spec.numel; ++i) total[static_cast<std::size_t>(i)] += uses * original[static_cast<std::size_t>(i)] * dy[static_cast<std::size_t>(i)];
    }
  }
  for (double& v : total) v /= world;
  return total;
}

void check_correctness(int world, const std::string& dtype) {
  const pc::Scenario s = host_scenario(world, {"training.iterations=2", "training.grad_accum=2", "training.dtype=" + dtype});
  const pg::ElementType type = pg::element_type_of(s.training.dtype);
  const std::uint64_t seed = 7;
  pg::HostDeviceGroup group(device_options(s));
  pg::ExecutorOptions options;
  options.data_seed = seed;

  std::vector<std::vector<std::byte>> originals = pg::seeded_parameters(s.model, type, seed + 1);
  const std::vector<std::vector<std::byte>> expected = originals;  // the test's own reference copy
  Mismatches gathered, gradients;
  std::vector<int> uses(s.model.params.size(), 0);
  for (const auto& m : s.model.modules) for (const int p : m.param_ids) ++uses[static_cast<std::size_t>(p)];

  options.on_module_ready = [&](pg::RankInspector& rank, int iteration, int module, pc::Phase phase) {
    for (const int p : s.model.modules[static_cast<std::size_t>(module)].param_ids) {
      const auto bytes = rank.gathered_parameter(p);
      gathered.count();
      if (bytes != expected[static_cast<std::size_t>(p)]) {
        gathered.add("rank " + std::to_string(rank.rank()) + " iteration " + std::to_string(iteration) + " " +
                     pc::phase_name(phase) + ": " + s.model.params[static_cast<std::size_t>(p)].name);
      }
    }
  };
  pg::ExecutorGeometry geometry;
  std::vector<RankData> rank_data;
  std::mutex reference_mutex;
  std::map<std::size_t, std::vector<double>> references;  // computed once, shared by the ranks
  options.on_backward_done = [&](pg::RankInspector& rank, int iteration) {
    if (iteration != 1) return;  // the partition holds exactly one backward's gradients
    for (std::size_t p = 0; p < s.model.params.size(); ++p) {
      const auto& spec = s.model.params[p];
      std::vector<double> reference;
      {
        std::lock_guard lock(reference_mutex);
        auto it = references.find(p);
        if (it == references.end()) {
          it = references.emplace(p, reference_gradient(s.model, static_cast<int>(p), pg::decode(type, expected[p]),
                                                        geometry, rank_data, uses[p])).first;
        }
        reference = it->second;
      }
      const auto got = pg::decode(type, rank.gradient_partition(static_cast<int>(p)));
      const std::int64_t part = (spec.numel + world - 1) / world;
      double scale = 1e-6;
      for (const double v : reference) scale = std::max(scale, std::abs(v));
      const double tolerance = (type == pg::ElementType::kBF16 ? 1e-2 : 1e-5) * scale;
      gradients.count();
      for (std::int64_t i = 0; i < part; ++i) {
        const std::int64_t global = rank.rank() * part + i;
        const double want = global < spec.numel ? reference[static_cast<std::size_t>(global)] : 0.0;
        if (std::abs(got[static_cast<std::size_t>(i)] - want) > tolerance) {
          gradients.add("rank " + std::to_string(rank.rank()) + " " + spec.name + "[" + std::to_string(global) +
                        "]: " + std::to_string(got[static_cast<std::size_t>(i)]) + " vs " + std::to_string(want));
          break;
        }
      }
    }
  };
  pg::Executor executor(s, group, options);
  geometry = executor.geometry();
  for (int r = 0; r < world; ++r) {
    rank_data.push_back({pg::decode(type, pg::encode(type, pg::rank_input_values(seed, r, geometry.workspace_numel))),
                         pg::decode(type, pg::encode(type, pg::rank_upstream_gradient_values(seed, r, geometry.workspace_numel)))});
  }
  executor.load_parameters(originals);
  // Nothing may read the originals from here on: the shards on the devices are all there is.
  for (auto& tensor : originals) std::fill(tensor.begin(), tensor.end(), std::byte{0xff});
  const pg::ExecutorResult result = executor.run();
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  EXPECT_TRUE(gathered.lines.empty()) << gathered.lines.front();
  EXPECT_TRUE(gradients.lines.empty()) << gradients.lines.front();
  // Every module's parameters on every rank in both passes of both iterations were checked.
  int param_uses = 0;
  for (const auto& m : s.model.modules) param_uses += static_cast<int>(m.param_ids.size());
  EXPECT_EQ(gathered.checks, 2 * 2 * world * param_uses);
  EXPECT_EQ(gradients.checks, world * static_cast<int>(s.model.params.size()));
  ASSERT_EQ(result.metrics.iterations.size(), 2u);
  EXPECT_EQ(result.metrics.iterations[1].trace_mode, pc::TraceMode::kComplete);
  if (world > 1) {
    EXPECT_GT(result.metrics.iterations[1].all_gather_count, 0);
  }
}

}  // namespace

TEST(Executor, GatheredParametersAndReducedGradientsAreExactOnOneRank) { check_correctness(1, "bf16"); }
TEST(Executor, GatheredParametersAndReducedGradientsAreExactOnTwoRanks) { check_correctness(2, "bf16"); }
TEST(Executor, GatheredParametersAndReducedGradientsAreExactOnFourRanks) { check_correctness(4, "bf16"); }
TEST(Executor, GatheredParametersAndReducedGradientsAreExactInFp32) { check_correctness(2, "fp32"); }

namespace {

// Counts every host synchronisation the executor asks of the device.
class CountingDevice : public pt::ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;
  void synchronize(pg::EventId e) override {
    ++syncs;
    ForwardingDevice::synchronize(e);
  }
  void synchronize_all() override {
    ++syncs;
    ForwardingDevice::synchronize_all();
  }
  int syncs = 0;
};

}  // namespace

TEST(Executor, TheHostBlocksOnlyWhereDeepSpeedDoes) {
  for (const std::string policy : {"static", "ema_threshold"}) {
    SCOPED_TRACE(policy);
    std::vector<std::string> overrides{"controller.policy=" + policy, "training.iterations=4"};
    if (policy != "static") overrides.push_back("controller.update_interval=2");  // samples iteration 2
    const pc::Scenario s = host_scenario(2, overrides);
    pg::HostDeviceGroup inner(device_options(s));
    pt::WrappingGroup<CountingDevice> group(inner, [](pg::Device& d) { return std::make_unique<CountingDevice>(d); });
    const pg::ExecutorResult result = pg::Executor(s, group).run();
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    std::map<std::pair<int, int>, int> end_of_backward;  // (rank, iteration) -> count
    std::map<int, int> logged;
    std::set<pg::SyncTag> tags;
    for (const auto& entry : result.call_log) {
      ++logged[entry.rank];
      tags.insert(entry.tag);
      if (entry.iteration > 0) {
        EXPECT_TRUE(pg::is_deepspeed_sync(entry.tag)) << pg::sync_tag_name(entry.tag) << " in iteration " << entry.iteration;
      } else {
        EXPECT_FALSE(pg::is_deepspeed_sync(entry.tag)) << pg::sync_tag_name(entry.tag) << " outside an iteration";
      }
      if (entry.tag == pg::SyncTag::kEndOfBackward) ++end_of_backward[{entry.rank, entry.iteration}];
    }
    for (int r = 0; r < 2; ++r) {
      // No synchronisation bypasses the log.
      EXPECT_EQ(group.wrapped(r).syncs, logged[r]) << "rank " << r;
      for (int i = 1; i <= 4; ++i) EXPECT_EQ((end_of_backward[{r, i}]), 1) << "rank " << r << " iteration " << i;
    }
    EXPECT_TRUE(tags.count(pg::SyncTag::kTraceCheck));
    EXPECT_FALSE(tags.count(pg::SyncTag::kInspection));
    if (policy == "static") {
      EXPECT_FALSE(tags.count(pg::SyncTag::kAgreement));
      EXPECT_FALSE(tags.count(pg::SyncTag::kControllerSamples));
    } else {
      EXPECT_TRUE(tags.count(pg::SyncTag::kAgreement));
      EXPECT_TRUE(tags.count(pg::SyncTag::kControllerSamples));
    }
  }
}

TEST(Executor, PlansAndBucketsAreDeterministicWithAStaticController) {
  const pc::Scenario s = host_scenario(2, {"training.iterations=3"});
  pg::ExecutorOptions options;
  options.record_plans = true;
  std::vector<pg::ExecutorResult> runs;
  for (int run = 0; run < 2; ++run) {
    pg::HostDeviceGroup group(device_options(s));
    runs.push_back(pg::Executor(s, group, options).run());
    ASSERT_EQ(runs.back().status, pc::RunStatus::kOk) << runs.back().message;
  }
  ASSERT_EQ(runs[0].plan_log.size(), 2u);
  EXPECT_FALSE(runs[0].plan_log[0].empty());
  EXPECT_EQ(runs[0].plan_log, runs[1].plan_log);
  EXPECT_EQ(runs[0].plan_log[0], runs[0].plan_log[1]);  // every rank ran the same plans
  // The bucket trajectory is the simulator's (same coordinator, same controller).
  prefetchlab::sim::World world(s, false);
  const auto simulated = world.run();
  ASSERT_EQ(simulated.status, pc::RunStatus::kOk);
  ASSERT_EQ(runs[0].metrics.buckets.size(), simulated.metrics.buckets.size());
  for (std::size_t i = 0; i < simulated.metrics.buckets.size(); ++i) {
    EXPECT_EQ(runs[0].metrics.buckets[i].bucket_numel, simulated.metrics.buckets[i].bucket_numel);
    EXPECT_EQ(runs[0].metrics.buckets[i].bucket_numel, runs[1].metrics.buckets[i].bucket_numel);
  }
  for (std::size_t i = 0; i < runs[0].metrics.iterations.size(); ++i) {
    const auto& real = runs[0].metrics.iterations[i];
    const auto& sim = simulated.metrics.iterations[i];
    EXPECT_EQ(real.all_gather_count, sim.all_gather_count) << "iteration " << i + 1;
    EXPECT_EQ(real.gathered_numel, sim.gathered_numel) << "iteration " << i + 1;
    EXPECT_EQ(real.reduce_scatter_count, sim.reduce_scatter_count) << "iteration " << i + 1;
    EXPECT_GT(real.step_time_ns, 0);
    EXPECT_GT(real.compute_ns, 0);
  }
  EXPECT_FALSE(runs[0].metrics.samples.empty());
}

// gpu::Executor on the host-thread device (issue 7): gathered parameters are bit-identical to the
// unsharded originals, reduced gradient partitions equal an unsharded reference, the host blocks
// only where DeepSpeed's does, and runs with a static controller are deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "core/model/checkpoint_units.hpp"
#include "core/scenario/scenario.hpp"
#include "tests/gpu_backend/forwarding_device.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "gpu_backend/host/host_device.hpp"
#include "tests/support/host_scenario.hpp"
#include "gpu_backend/executor/seeded_data.hpp"
#include "sim/ranks/world.hpp"

namespace pc = prefetchlab::core;
namespace pg = prefetchlab::gpu;
namespace pt = prefetchlab::testing;

namespace {

using prefetchlab::testing::host_scenario;

pg::HostDeviceOptions device_options(const pc::Scenario& s) { return prefetchlab::testing::host_device_options(s); }

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

// The unsharded reference gradient of `param` averaged over ranks (deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py: grads are
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

// The module index of `name` (the test's own look-up: a wrong name fails the test).
int module_index(const pc::ModelSpec& model, const std::string& name) {
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    if (model.modules[m].name == name) return static_cast<int>(m);
  }
  ADD_FAILURE() << "no module " << name;
  return 0;
}

// Parameter uses of `module` and its subtree.
int subtree_param_uses(const pc::ModelSpec& model, int module) {
  const auto& spec = model.modules[static_cast<std::size_t>(module)];
  int uses = static_cast<int>(spec.param_ids.size());
  for (const int child : spec.children) uses += subtree_param_uses(model, child);
  return uses;
}

// Two iterations, no optimizer step in between (grad_accum 2): every gathered parameter equals
// its original and iteration 1's reduced gradient partitions equal the reference. `overrides`
// add features; `edit` changes the loaded scenario (divergence has no --set form).
void check_correctness(int world, const std::string& dtype, std::vector<std::string> overrides = {},
                       const std::function<void(pc::Scenario&)>& edit = {}) {
  overrides.insert(overrides.end(), {"training.iterations=2", "training.grad_accum=2", "training.dtype=" + dtype});
  pc::Scenario s = host_scenario(world, overrides);
  if (edit) edit(s);
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
  // Every module's parameters on every rank in both passes of both iterations were checked,
  // the re-run forward of each checkpoint unit too, skipped modules not.
  int param_uses = 0;
  const pc::CheckpointUnits units = pc::checkpoint_units(s.model, s.training.activation_checkpointing);
  for (std::size_t m = 0; m < s.model.modules.size(); ++m) {
    const int module_uses = static_cast<int>(s.model.modules[m].param_ids.size());
    param_uses += (units.inside[m] ? 3 : 2) * module_uses;
  }
  int skipped_uses = 0;
  for (const auto& d : s.divergence) {
    for (const int m : d.skipped_modules) {
      const int subtree_uses = subtree_param_uses(s.model, m);
      skipped_uses += (units.inside[static_cast<std::size_t>(m)] ? 3 : 2) * subtree_uses *
                      (d.ranks.empty() ? world : static_cast<int>(d.ranks.size()));
    }
  }
  EXPECT_EQ(gathered.checks, 2 * world * param_uses - skipped_uses);
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

// zero.offload_param: the shards live in host memory; each fetch copies them up first.
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWithParametersOffloadedOnOneRank) {
  check_correctness(1, "bf16", {"zero.offload_param.device=cpu"});
}
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWithParametersOffloadedOnTwoRanks) {
  check_correctness(2, "bf16", {"zero.offload_param.device=cpu"});
}
// zero.offload_optimizer: the gradient partitions checked are the host copies CPU Adam reads.
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWithTheOptimizerOffloadedOnOneRank) {
  check_correctness(1, "bf16", {"zero.offload_optimizer.device=cpu"});
}
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWithTheOptimizerOffloadedOnTwoRanks) {
  check_correctness(2, "fp32", {"zero.offload_optimizer.device=cpu", "zero.offload_param.device=cpu"});
}
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWithActivationCheckpointingOnOneRank) {
  check_correctness(1, "bf16", {"training.activation_checkpointing=true"});
}
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWithActivationCheckpointingOnTwoRanks) {
  check_correctness(2, "bf16", {"training.activation_checkpointing=true"});
}
// Iteration 2 skips the last layer: the trace is invalidated mid-iteration and drained.
TEST(Executor, GatheredParametersAndReducedGradientsAreExactWhenTheModuleOrderDiverges) {
  for (const int world : {1, 2}) {
    SCOPED_TRACE(world);
    check_correctness(world, "bf16", {}, [](pc::Scenario& s) {
      s.divergence.push_back({2, {module_index(s.model, "model.layers.1")}, {}});
    });
  }
}

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

namespace {

// Every host synchronisation is logged with a DeepSpeed tag inside iterations (and only there),
// one end-of-backward synchronisation per iteration, nothing unlogged. On one rank DeepSpeed
// gathers through no-gather handles, whose first wait synchronises the current stream
// (NoGatherCoalescedHandle.wait in deepspeed/runtime/zero/partition_parameters.py:
// `if not get_accelerator().is_synchronized_device(): current_stream().synchronize()`, then
// `__complete = True`): exactly one such block per handle, and none on more ranks.
void check_host_blocks(int world, const std::vector<std::string>& features) {
  for (const std::string policy : {"static", "ema_threshold"}) {
    SCOPED_TRACE(policy);
    std::vector<std::string> overrides{"controller.policy=" + policy, "training.iterations=4"};
    if (policy != "static") overrides.push_back("controller.update_interval=2");  // samples iteration 2
    overrides.insert(overrides.end(), features.begin(), features.end());
    const pc::Scenario s = host_scenario(world, overrides);
    pg::HostDeviceGroup inner(device_options(s));
    pt::WrappingGroup<CountingDevice> group(inner, [](pg::Device& d) { return std::make_unique<CountingDevice>(d); });
    const pg::ExecutorResult result = pg::Executor(s, group).run();
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    std::map<std::pair<int, int>, int> end_of_backward;  // (rank, iteration) -> count
    std::int64_t no_gather_waits = 0;
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
      if (entry.tag == pg::SyncTag::kNoGatherWait) ++no_gather_waits;
    }
    for (int r = 0; r < world; ++r) {
      // No synchronisation bypasses the log.
      EXPECT_EQ(group.wrapped(r).syncs, logged[r]) << "rank " << r;
      for (int i = 1; i <= 4; ++i) EXPECT_EQ((end_of_backward[{r, i}]), 1) << "rank " << r << " iteration " << i;
    }
    if (world == 1) {
      // One gather per handle here (one dtype), every handle waited on before the run ends
      // (each iteration ends with an optimizer step, which drains the registry).
      std::int64_t handles = 0;
      for (const auto& it : result.metrics.iterations) handles += it.all_gather_count;
      EXPECT_GT(handles, 0);
      EXPECT_EQ(no_gather_waits, handles);
    } else {
      EXPECT_EQ(no_gather_waits, 0);
      EXPECT_TRUE(tags.count(pg::SyncTag::kTraceCheck));  // one rank has no other rank to check against
    }
    EXPECT_FALSE(tags.count(pg::SyncTag::kInspection));
    EXPECT_EQ(tags.count(pg::SyncTag::kControllerSamples), policy == "static" ? 0u : 1u);
    // One rank applies its own proposal: no all-reduce to read back.
    EXPECT_EQ(tags.count(pg::SyncTag::kAgreement), policy == "static" || world == 1 ? 0u : 1u);
  }
}

}  // namespace

TEST(Executor, TheHostBlocksOnlyWhereDeepSpeedDoes) { check_host_blocks(2, {}); }

// One rank: the no-gather handle's first wait blocks the host whether or not the parameters
// live in host memory (without offload its `.to(device)` copies nothing, the synchronisation
// stays).
TEST(Executor, TheHostBlocksOnlyWhereDeepSpeedDoesOnOneRank) {
  check_host_blocks(1, {});
  check_host_blocks(1, {"zero.offload_param.device=cpu"});
}

// Offload adds no host block: the parameter copies are stream-ordered before the all-gathers;
// the gradient copies down run on the reduce stream, which the end-of-backward synchronisation
// (deepspeedai/DeepSpeed deepspeed/runtime/zero/stage3.py) already waits for before CPU Adam reads them; the updated
// parameters go up stream-ordered. Checkpointing's re-run forward fetches like any forward.
TEST(Executor, TheHostBlocksOnlyWhereDeepSpeedDoesWithOffloadAndCheckpointing) {
  check_host_blocks(2, {"zero.offload_param.device=cpu", "zero.offload_optimizer.device=cpu",
                     "training.activation_checkpointing=true"});
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

namespace {

// Logs, in issue order, what the offload tests look at: streams by name, events by stream,
// stream waits, host-to-device copies and all-gathers.
class RecordingDevice : public pt::ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;
  enum class Kind { kRecord, kWait, kHostToDevice, kAllGather };
  struct Call {
    Kind kind;
    pg::StreamId stream;
    pg::EventId event;
    std::uint64_t bytes;
  };
  pg::StreamId create_stream(std::string_view name) override {
    const pg::StreamId id = ForwardingDevice::create_stream(name);
    stream_names[id] = std::string(name);
    return id;
  }
  pg::EventId record(pg::StreamId s) override {
    const pg::EventId e = ForwardingDevice::record(s);
    calls.push_back({Kind::kRecord, s, e, 0});
    return e;
  }
  void wait(pg::StreamId s, pg::EventId e) override {
    calls.push_back({Kind::kWait, s, e, 0});
    ForwardingDevice::wait(s, e);
  }
  void copy_host_to_device(pg::StreamId s, pg::DeviceSpan d, const void* h) override {
    calls.push_back({Kind::kHostToDevice, s, -1, d.bytes});
    ForwardingDevice::copy_host_to_device(s, d, h);
  }
  void all_gather(pg::StreamId s, pg::DeviceSpan send, pg::DeviceSpan recv, pg::ElementType t) override {
    calls.push_back({Kind::kAllGather, s, -1, send.bytes});
    ForwardingDevice::all_gather(s, send, recv, t);
  }
  pg::StreamId stream(const std::string& name) const {
    for (const auto& [id, n] : stream_names) {
      if (n == name) return id;
    }
    ADD_FAILURE() << "no stream " << name;
    return -1;
  }
  std::map<pg::StreamId, std::string> stream_names;
  std::vector<Call> calls;
};

struct RecordedRun {
  pg::ExecutorResult result;
  std::vector<std::vector<RecordingDevice::Call>> calls;  // per rank
  std::vector<pg::StreamId> all_gather_stream, comm_stream;
};

RecordedRun recorded_run(const pc::Scenario& s) {
  pg::HostDeviceGroup inner(device_options(s));
  pt::WrappingGroup<RecordingDevice> group(inner, [](pg::Device& d) { return std::make_unique<RecordingDevice>(d); });
  RecordedRun run;
  run.result = pg::Executor(s, group).run();
  for (int r = 0; r < inner.world_size(); ++r) {
    run.calls.push_back(group.wrapped(r).calls);
    run.all_gather_stream.push_back(group.wrapped(r).stream("all_gather"));
    run.comm_stream.push_back(group.wrapped(r).stream("communicator"));
  }
  return run;
}

struct RealAndSimulated {
  pc::Metrics real;
  pc::Metrics simulated;
};

// The host scenario on `world` ranks with the given settings (either may be empty), run on the
// host-thread device and in the simulator.
RealAndSimulated real_and_simulated(int world, const std::string& setting, const std::string& more) {
  std::vector<std::string> overrides;
  for (const std::string& o : {setting, more}) {
    if (!o.empty()) overrides.push_back(o);
  }
  const pc::Scenario s = host_scenario(world, overrides);
  pg::HostDeviceGroup group(device_options(s));
  const pg::ExecutorResult real = pg::Executor(s, group).run();
  EXPECT_EQ(real.status, pc::RunStatus::kOk) << real.message;
  const auto simulated = prefetchlab::sim::World(s, false).run();
  EXPECT_EQ(simulated.status, pc::RunStatus::kOk) << simulated.message;
  return {real.metrics, simulated.metrics};
}

}  // namespace

// zero.offload_param on two ranks: before every all-gather, this rank's shards of exactly the
// gathered parameters cross host->device on the all-gather stream, and the communication
// stream waits for an event recorded on the all-gather stream after the last of those copies.
TEST(Executor, OffloadedParametersCrossTheHostLinkOnTheAllGatherStreamBeforeEachAllGather) {
  for (const bool offload : {true, false}) {
    SCOPED_TRACE(offload ? "offloaded" : "on the device");
    std::vector<std::string> overrides{"training.iterations=3"};
    if (offload) overrides.push_back("zero.offload_param.device=cpu");
    const RecordedRun run = recorded_run(host_scenario(2, overrides));
    ASSERT_EQ(run.result.status, pc::RunStatus::kOk) << run.result.message;
    for (int r = 0; r < 2; ++r) {
      const pg::StreamId ag = run.all_gather_stream[static_cast<std::size_t>(r)];
      const pg::StreamId comm = run.comm_stream[static_cast<std::size_t>(r)];
      std::map<pg::EventId, std::size_t> recorded_at;  // event -> index of its record call
      std::uint64_t h2d_bytes = 0;
      std::size_t last_h2d = 0, gathers = 0, host_copies = 0;
      bool comm_waited_after_copies = false;
      const auto& calls = run.calls[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < calls.size(); ++i) {
        const auto& c = calls[i];
        switch (c.kind) {
          case RecordingDevice::Kind::kRecord: recorded_at[c.event] = i; break;
          case RecordingDevice::Kind::kHostToDevice:
            if (c.stream == ag) {
              h2d_bytes += c.bytes;
              last_h2d = i;
              ++host_copies;
            }
            break;
          case RecordingDevice::Kind::kWait:
            if (c.stream == comm && h2d_bytes > 0 && recorded_at.count(c.event) &&
                calls[recorded_at[c.event]].stream == ag && recorded_at[c.event] > last_h2d) {
              comm_waited_after_copies = true;
            }
            break;
          case RecordingDevice::Kind::kAllGather:
            ++gathers;
            if (offload) {
              EXPECT_EQ(h2d_bytes, c.bytes) << "rank " << r << " all-gather " << gathers;
              EXPECT_TRUE(comm_waited_after_copies) << "rank " << r << " all-gather " << gathers;
            } else {
              EXPECT_EQ(h2d_bytes, 0u) << "rank " << r << " all-gather " << gathers;
            }
            h2d_bytes = 0;
            comm_waited_after_copies = false;
            break;
        }
      }
      EXPECT_GT(gathers, 0u);
      if (offload) {
        EXPECT_GE(host_copies, gathers);
      } else {
        EXPECT_EQ(host_copies, 0u);
      }
    }
  }
}

// zero.offload_param on one rank (no all-gather): every fetched parameter crosses host->device
// on the all-gather stream, and the compute stream waits for that stream before using it.
TEST(Executor, OffloadedParametersCrossTheHostLinkOnOneRank) {
  const pc::Scenario s = host_scenario(1, {"training.iterations=3", "zero.offload_param.device=cpu"});
  const RecordedRun run = recorded_run(s);
  ASSERT_EQ(run.result.status, pc::RunStatus::kOk) << run.result.message;
  std::uint64_t h2d_bytes = 0;
  for (const auto& c : run.calls[0]) {
    EXPECT_NE(c.kind, RecordingDevice::Kind::kAllGather);
    if (c.kind == RecordingDevice::Kind::kHostToDevice && c.stream == run.all_gather_stream[0]) h2d_bytes += c.bytes;
  }
  std::int64_t gathered_numel = 0;
  for (const auto& it : run.result.metrics.iterations) gathered_numel += it.gathered_numel;
  EXPECT_GT(gathered_numel, 0);
  EXPECT_EQ(h2d_bytes, static_cast<std::uint64_t>(gathered_numel) * 2);  // bf16
}

// What offload takes off the device is what the simulator takes off: resident model states only
// (the parameter shards; the fp32 master weights and both Adam moments), nothing kept twice.
TEST(Executor, OffloadFreesTheSameDeviceMemoryAsInTheSimulator) {
  const auto peak = [](const pc::Metrics& m) {
    std::int64_t most = 0;
    for (const auto& it : m.iterations) most = std::max(most, it.peak_allocated_bytes);
    return most;
  };
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> peaks;  // real, simulated
  for (const std::string setting : {"", "zero.offload_param.device=cpu", "zero.offload_optimizer.device=cpu"}) {
    const RealAndSimulated run = real_and_simulated(2, "training.iterations=2", setting);
    peaks[setting] = {peak(run.real), peak(run.simulated)};
  }
  for (const std::string setting : {"zero.offload_param.device=cpu", "zero.offload_optimizer.device=cpu"}) {
    const std::int64_t real_saved = peaks[""].first - peaks[setting].first;
    const std::int64_t simulated_saved = peaks[""].second - peaks[setting].second;
    EXPECT_GT(real_saved, 0) << setting;
    EXPECT_EQ(real_saved, simulated_saved) << setting;
  }
}

// One rank with zero.offload_param: each fetched parameter gets its own device buffer (the
// no-gather handle's `.to(device)`), on the executor as in the simulator — the same peak of
// gathered bytes in every iteration — and those buffers take back part of what the shards
// leaving the device saved. (How much depends on which parameters are resident at the
// allocation peak, which the executor's own workspaces move: not compared.)
TEST(Executor, OneRankOffloadHoldsTheSameParameterBuffersAsTheSimulator) {
  std::map<std::string, RealAndSimulated> runs;
  for (const std::string setting : {"", "zero.offload_param.device=cpu"}) {
    const RealAndSimulated& run = runs[setting] = real_and_simulated(1, "training.iterations=3", setting);
    ASSERT_EQ(run.real.iterations.size(), run.simulated.iterations.size());
    for (std::size_t i = 0; i < run.real.iterations.size(); ++i) {
      EXPECT_EQ(run.real.iterations[i].peak_gathered_param_bytes, run.simulated.iterations[i].peak_gathered_param_bytes)
          << setting << " iteration " << i + 1;
    }
  }
  const auto& [real_offloaded, simulated_offloaded] = runs["zero.offload_param.device=cpu"];
  const auto& [real_plain, simulated_plain] = runs[""];
  for (const auto& it : simulated_plain.iterations) EXPECT_EQ(it.peak_gathered_param_bytes, 0);  // views of the shards
  for (const auto& it : simulated_offloaded.iterations) EXPECT_GT(it.peak_gathered_param_bytes, 0);
  const std::int64_t shard_bytes = host_scenario(1).model.total_numel() * 2;  // bf16, one flat tensor
  for (std::size_t i = 0; i < real_plain.iterations.size(); ++i) {
    EXPECT_LT(real_plain.iterations[i].peak_allocated_bytes - real_offloaded.iterations[i].peak_allocated_bytes, shard_bytes)
        << "iteration " << i + 1;
    EXPECT_LT(simulated_plain.iterations[i].peak_allocated_bytes - simulated_offloaded.iterations[i].peak_allocated_bytes,
              shard_bytes)
        << "iteration " << i + 1;
  }
}

// CPU Adam (offload_optimizer) updates the parameters exactly as the device's Adam: after two
// optimizer steps every gathered parameter is bit-identical between the two runs, and differs
// from its original (the update reached the shards, on the device or in host memory).
TEST(Executor, CpuAdamUpdatesTheParametersAsTheDeviceAdamDoes) {
  std::map<std::string, std::map<int, std::vector<std::byte>>> seen;  // setting -> param -> bytes
  const std::vector<std::string> settings{"", "zero.offload_optimizer.device=cpu",
                                          "zero.offload_param.device=cpu",
                                          "zero.offload_optimizer.device=cpu,zero.offload_param.device=cpu"};
  for (const std::string& setting : settings) {
    SCOPED_TRACE(setting);
    std::vector<std::string> overrides{"training.iterations=3", "training.grad_accum=1", "training.dtype=fp32"};
    for (std::size_t at = 0; at < setting.size();) {
      const std::size_t comma = std::min(setting.find(',', at), setting.size());
      overrides.push_back(setting.substr(at, comma - at));
      at = comma + 1;
    }
    const pc::Scenario s = host_scenario(2, overrides);
    pg::HostDeviceGroup group(device_options(s));
    pg::ExecutorOptions options;
    std::mutex mutex;
    options.on_module_ready = [&](pg::RankInspector& rank, int iteration, int module, pc::Phase phase) {
      if (iteration != 3 || phase != pc::Phase::kForward || rank.rank() != 0) return;
      for (const int p : s.model.modules[static_cast<std::size_t>(module)].param_ids) {
        auto bytes = rank.gathered_parameter(p);
        std::lock_guard lock(mutex);
        seen[setting][p] = std::move(bytes);
      }
    };
    const pg::ExecutorResult result = pg::Executor(s, group, options).run();
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    ASSERT_EQ(seen[setting].size(), s.model.params.size());
  }
  const pc::Scenario s = host_scenario(2, {"training.dtype=fp32"});
  const auto originals = pg::seeded_parameters(s.model, pg::ElementType::kFP32, pg::ExecutorOptions{}.data_seed);
  int changed = 0;
  for (const auto& [p, bytes] : seen[""]) changed += bytes != originals[static_cast<std::size_t>(p)];
  EXPECT_GT(changed, static_cast<int>(s.model.params.size()) / 2);
  for (const std::string& setting : settings) {
    for (const auto& [p, bytes] : seen[""]) {
      EXPECT_TRUE(seen[setting][p] == bytes) << setting << ": " << s.model.params[static_cast<std::size_t>(p)].name;
    }
  }
}

// Checkpointing re-runs each layer's forward through the coordinator, and divergence skips
// modules: the executor issues exactly the simulator's collectives for both.
TEST(Executor, CollectivesMatchTheSimulatorWithCheckpointingOffloadAndDivergence) {
  const std::vector<std::string> settings{"training.activation_checkpointing=true", "zero.offload_param.device=cpu",
                                          "zero.offload_optimizer.device=cpu", "divergence"};
  for (const std::string& setting : settings) {
    SCOPED_TRACE(setting);
    std::vector<std::string> overrides{"training.iterations=5"};
    if (setting != "divergence") overrides.push_back(setting);
    pc::Scenario s = host_scenario(2, overrides);
    if (setting == "divergence") s.divergence.push_back({3, {module_index(s.model, "model.layers.1")}, {}});
    pg::HostDeviceGroup group(device_options(s));
    const pg::ExecutorResult real = pg::Executor(s, group).run();
    ASSERT_EQ(real.status, pc::RunStatus::kOk) << real.message;
    const auto simulated = prefetchlab::sim::World(s, false).run();
    ASSERT_EQ(simulated.status, pc::RunStatus::kOk);
    ASSERT_EQ(real.metrics.iterations.size(), simulated.metrics.iterations.size());
    for (std::size_t i = 0; i < real.metrics.iterations.size(); ++i) {
      const auto& r = real.metrics.iterations[i];
      const auto& m = simulated.metrics.iterations[i];
      EXPECT_EQ(r.trace_mode, m.trace_mode) << "iteration " << i + 1;
      EXPECT_EQ(r.all_gather_count, m.all_gather_count) << "iteration " << i + 1;
      EXPECT_EQ(r.gathered_numel, m.gathered_numel) << "iteration " << i + 1;
      EXPECT_EQ(r.reduce_scatter_count, m.reduce_scatter_count) << "iteration " << i + 1;
    }
    if (setting == "divergence") {
      EXPECT_EQ(real.metrics.iterations[3].trace_mode, pc::TraceMode::kRecord);  // re-recorded after the divergence
    }
  }
  // While recording (iteration 1) checkpointing gathers each layer three times (forward, re-run
  // forward, backward); from the complete trace the re-run's gathers are kept for backward.
  pc::Scenario plain = host_scenario(2, {"training.iterations=3"});
  pc::Scenario checkpointed = host_scenario(2, {"training.iterations=3", "training.activation_checkpointing=true"});
  pg::HostDeviceGroup g1(device_options(plain)), g2(device_options(checkpointed));
  const auto a = pg::Executor(plain, g1).run();
  const auto b = pg::Executor(checkpointed, g2).run();
  ASSERT_EQ(a.status, pc::RunStatus::kOk);
  ASSERT_EQ(b.status, pc::RunStatus::kOk);
  EXPECT_GT(b.metrics.iterations[0].gathered_numel, a.metrics.iterations[0].gathered_numel);
}

// The program steps of a plan log (core::describe's lines), without the plans the executor noted
// between them ("gather ...", "wait ...", "release 3 4", "reduce_scatter N", "optimizer_update").
std::vector<std::string> program_steps(const std::vector<std::string>& plan_log) {
  std::vector<std::string> steps;
  for (const std::string& line : plan_log) {
    const bool plan = line.rfind("gather ", 0) == 0 || line.rfind("wait ", 0) == 0 ||
                      line.rfind("reduce_scatter ", 0) == 0 || line == "optimizer_update" ||
                      (line.rfind("release", 0) == 0 && line.rfind("release forward", 0) != 0 &&
                       line.rfind("release backward", 0) != 0);
    if (!plan) steps.push_back(line);
  }
  return steps;
}

// One DeepSpeed program (core::RankProgram) drives both backends: on every rank the executor
// performs exactly the steps the simulator performs, with checkpointing, offload, divergence,
// gradient accumulation and a bucket small enough to flush mid-backward.
TEST(Executor, BothBackendsRunTheSameProgramStepByStep) {
  const std::vector<std::vector<std::string>> settings{
      {"training.activation_checkpointing=true"},
      {"zero.offload_param.device=cpu", "zero.offload_optimizer.device=cpu", "zero.contiguous_gradients=false"},
      {"divergence"},
      {"training.grad_accum=2", "zero.reduce_bucket_size=3000"}};
  for (const std::vector<std::string>& setting : settings) {
    SCOPED_TRACE(setting.front());
    std::vector<std::string> overrides{"training.iterations=4"};
    if (setting.front() != "divergence") overrides.insert(overrides.end(), setting.begin(), setting.end());
    pc::Scenario s = host_scenario(2, overrides);
    if (setting.front() == "divergence") {
      s.divergence.push_back({2, {module_index(s.model, "model.layers.1")}, {}});
    }
    pg::ExecutorOptions options;
    options.record_plans = true;
    pg::HostDeviceGroup group(device_options(s));
    const pg::ExecutorResult real = pg::Executor(s, group, options).run();
    ASSERT_EQ(real.status, pc::RunStatus::kOk) << real.message;
    prefetchlab::sim::World world(s, false);
    std::vector<std::vector<std::string>> simulated(2);
    for (int r = 0; r < 2; ++r) world.journal_steps(r, &simulated[static_cast<std::size_t>(r)]);
    ASSERT_EQ(world.run().status, pc::RunStatus::kOk);
    for (std::size_t r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      const std::vector<std::string> executed = program_steps(real.plan_log[r]);
      ASSERT_FALSE(executed.empty());
      EXPECT_EQ(executed, simulated[r]);
    }
  }
}

// Ranks that take different paths issue different collectives: the real run fails as a
// collective mismatch, as the simulator reports it (and as NCCL hangs).
TEST(Executor, RankDivergentControlFlowIsACollectiveMismatch) {
  pc::Scenario s = host_scenario(2, {"training.iterations=3"});
  s.divergence.push_back({3, {module_index(s.model, "model.layers.1")}, {1}});
  auto options = device_options(s);
  options.collective_timeout = std::chrono::milliseconds(2'000);
  pg::HostDeviceGroup group(options);
  const pg::ExecutorResult real = pg::Executor(s, group).run();
  EXPECT_EQ(real.status, pc::RunStatus::kCollectiveMismatch) << real.message;
  EXPECT_EQ(prefetchlab::sim::World(s, false).run().status, pc::RunStatus::kCollectiveMismatch);
}

// The workspaces' row stride is a whole number of 16-byte groups, so cuBLAS can run every GEMM
// on its tensor-core kernels: GPT-2's 50,257-token vocabulary would otherwise make each GEMM's
// leading dimension odd.
TEST(Executor, WorkspaceRowsAreSixteenByteAlignedForTensorCoreGemms) {
  const pc::Scenario s = pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/gpt2-medium-4-nodes.yaml",
                                           {"cluster.nodes=1", "cluster.gpus_per_node=1", "output.trace=false"},
                                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  pg::HostDeviceGroup group(device_options(s));
  const pg::ExecutorGeometry g = pg::Executor(s, group).geometry();
  EXPECT_EQ(g.max_dim, 50264);  // 50,257 rounded up to a multiple of 8
  EXPECT_EQ(g.max_dim * pg::element_bytes(pg::ElementType::kBF16) % 16, 0);
  EXPECT_GE(g.workspace_numel, g.tokens * g.max_dim);
  // A model whose widest dimension is already aligned keeps it (the tiny Llama: vocabulary 4096).
  EXPECT_EQ(pg::Executor(host_scenario(1), group).geometry().max_dim, 4096);
}

namespace {

// Counts the GEMMs by batch count (the attention core's are batched per sequence).
class GemmCountingDevice : public pt::ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;
  void gemm(pg::StreamId s, const pg::GemmArgs& g) override {
    ++by_batch[g.batch_count];
    ForwardingDevice::gemm(s, g);
  }
  std::map<std::int64_t, int> by_batch;
};

}  // namespace

// With 2 sequences per micro-batch, each attention module's QK^T and AV products are strided-
// batched GEMMs of one batch per sequence: 2 forward, 4 backward per iteration.
TEST(Executor, AttentionCoreRunsAsBatchedGemmsOnePerSequence) {
  const pc::Scenario s = host_scenario(1, {"training.micro_batch=2", "training.iterations=2"});
  int attention_modules = 0;
  for (const auto& module : s.model.modules) attention_modules += module.forward_flops.per_token_per_position > 0;
  ASSERT_GT(attention_modules, 0);
  pg::HostDeviceGroup inner(device_options(s));
  pt::WrappingGroup<GemmCountingDevice> group(inner, [](pg::Device& d) { return std::make_unique<GemmCountingDevice>(d); });
  const pg::ExecutorResult result = pg::Executor(s, group).run();
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  const auto& counts = group.wrapped(0).by_batch;
  EXPECT_EQ(counts.count(2) ? counts.at(2) : 0, 2 * 6 * attention_modules);
  EXPECT_GT(counts.count(1) ? counts.at(1) : 0, 0);  // the Linear layers' GEMMs
  EXPECT_EQ(counts.size(), 2u);
}

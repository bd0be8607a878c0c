// Whole-simulation invariants on bundled scenarios (issue "Faithful ZeRO-3 simulation", done-when
// 2): properties that must hold whatever the calibration, each able to fail if the executor
// mis-orders streams, double-counts stalls or forgets a collective.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/hardware/hardware_derived.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;

namespace {

pc::Scenario scenario(const std::string& file, std::vector<std::string> overrides = {}) {
  overrides.push_back("output.trace=false");
  return pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/" + file, overrides,
                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

ps::WorldResult simulate(const pc::Scenario& s) {
  ps::World world(s, /*record_trace=*/false);
  return world.run();
}

std::int64_t total_stall(const pc::SummaryStats& stats) {
  return stats.mean_forward_stall_ns + stats.mean_backward_stall_ns;
}

}  // namespace

TEST(Simulation, FreeCommunicationExposesNothing) {
  // Zero latency, (effectively) infinite bandwidth, no copies around the collectives: whatever
  // the prefetch settings, compute never waits for communication.
  for (const char* bucket : {"0", "1e5", "5e7"}) {
    const auto s = scenario("gpt2-small-divergence.yaml",
                            {"cluster.calibration.collective_latency_us=0",
                             "cluster.calibration.allgather_bus_bandwidth_gb_per_s=1e12",
                             "cluster.calibration.reduce_scatter_bus_bandwidth_gb_per_s=1e12",
                             "cluster.calibration.copy_time_scale=0",
                             std::string("zero.stage3_prefetch_bucket_size=") + bucket});
    const auto result = simulate(s);
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    for (const auto& it : result.metrics.iterations) {
      EXPECT_EQ(it.exposed_comm_ns, 0) << "bucket " << bucket << " iteration " << it.iteration;
      EXPECT_EQ(it.forward_stall_ns + it.backward_stall_ns, 0) << "iteration " << it.iteration;
    }
  }
}

TEST(Simulation, WithoutPrefetchOrComputeAllCommunicationIsExposed) {
  // Bucket 0 and free compute and host: nothing overlaps, so each steady iteration is exactly
  // its all-gathers plus its reduce-scatters, and every all-gather shows up as a fetch stall or
  // as the blocking persistent re-gather.
  const auto s = scenario("gpt2-small-divergence.yaml",
                          {"zero.stage3_prefetch_bucket_size=0", "cluster.calibration.compute_time_scale=0",
                           "cluster.calibration.host_speed=inf", "divergence=[]"});
  const auto result = simulate(s);
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  ASSERT_EQ(result.metrics.iterations.size(), 10u);
  for (const auto& it : result.metrics.iterations) {
    if (it.iteration < 3) continue;  // iterations 1-2 also run the trace checks (broadcasts)
    EXPECT_GT(it.all_gather_ns, 0);
    EXPECT_EQ(it.exposed_comm_ns, it.all_gather_ns + it.reduce_scatter_ns) << "iteration " << it.iteration;
    EXPECT_EQ(it.step_time_ns, it.exposed_comm_ns) << "iteration " << it.iteration;
  }
}

TEST(Simulation, DefaultBucketBeatsNoPrefetchAndTinyBucketsWhenLatencyBound) {
  // 32 ranks over 4 nodes: every collective pays the multi-node ring latency, so coalescing
  // (DeepSpeed's 5e7) must stall less than one collective per parameter (1e5) or none (0).
  // Pinned to the ring/Simple model: NCCL's tuner sends small messages with LL at a third of
  // the Simple latency, which is a different question from the one this invariant asks. And a
  // free host: at DeepSpeed's host costs this job is host-bound, so the host's time between a
  // gather and its use hides the latency whatever the bucket (another question again).
  auto stall_at = [](const char* bucket) {
    const auto s = scenario("gpt2-medium-4-nodes.yaml", {std::string("zero.stage3_prefetch_bucket_size=") + bucket,
                                                         "cluster.calibration.collective_model=ring",
                                                         "cluster.calibration.host_speed=inf"});
    const auto result = simulate(s);
    EXPECT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    return total_stall(pc::summarize(result.metrics, 2));
  };
  const auto at_default = stall_at("5e7");
  const auto at_zero = stall_at("0");
  const auto at_tiny = stall_at("1e5");
  EXPECT_LT(at_default, at_zero);
  EXPECT_LT(at_default, at_tiny);
}

TEST(Simulation, StepTimeIsNeverShorterThanCompute) {
  for (const char* file : {"default.yaml", "bert-base-qa-2x-rtx4000ada.yaml", "tiny-llama-2x-h100.yaml",
                           "llama-2-13b-grad-accum.yaml", "gpt2-small-divergence.yaml"}) {
    const auto result = simulate(scenario(file));
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << file << ": " << result.message;
    for (const auto& it : result.metrics.iterations) {
      EXPECT_GE(it.step_time_ns, it.compute_ns) << file << " iteration " << it.iteration;
      EXPECT_GE(it.step_time_ns, it.forward_ns + it.backward_ns) << file;
      EXPECT_GT(it.compute_ns, 0) << file;
    }
  }
}

TEST(Simulation, DivergenceInvalidatesThenRerecordsThenPrefetches) {
  // Iteration 5 skips transformer.h.11: the trace is invalidated mid-iteration (rest without
  // prefetch), iteration 6 records, iteration 7 prefetches again like iterations 2-4.
  const auto result = simulate(scenario("gpt2-small-divergence.yaml"));
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  const auto& its = result.metrics.iterations;
  ASSERT_EQ(its.size(), 10u);
  const std::vector<pc::TraceMode> modes{pc::TraceMode::kRecord,   pc::TraceMode::kComplete,
                                         pc::TraceMode::kComplete, pc::TraceMode::kComplete,
                                         pc::TraceMode::kComplete, pc::TraceMode::kRecord,
                                         pc::TraceMode::kComplete, pc::TraceMode::kComplete,
                                         pc::TraceMode::kComplete, pc::TraceMode::kComplete};
  for (std::size_t i = 0; i < its.size(); ++i) EXPECT_EQ(its[i].trace_mode, modes[i]) << "iteration " << i + 1;
  // A recording iteration gathers module by module (no prefetch): many more collectives.
  EXPECT_GT(its[5].all_gather_count, 10 * its[3].all_gather_count);
  EXPECT_GT(its[4].all_gather_count, its[3].all_gather_count);  // the rest of 5 ran on demand
  // Iteration 8 is steady again and identical to iteration 4.
  EXPECT_EQ(its[7].all_gather_count, its[3].all_gather_count);
  EXPECT_EQ(its[7].step_time_ns, its[3].step_time_ns);
}

TEST(Simulation, OptimizerStepsEveryGradAccumIterations) {
  const auto result = simulate(scenario("llama-2-13b-grad-accum.yaml"));
  ASSERT_EQ(result.status, pc::RunStatus::kOk);
  for (const auto& it : result.metrics.iterations) {
    EXPECT_EQ(it.optimizer_step, it.iteration % 4 == 0) << "iteration " << it.iteration;
    EXPECT_EQ(it.optimizer_ns > 0, it.optimizer_step) << "iteration " << it.iteration;
  }
}

TEST(Simulation, SamplesFollowTheSameRankAndPhaseRule) {
  // One sample per fetch that has an earlier same-phase fetch on that rank in that iteration:
  // per rank and phase, fetches - 1 samples; wait never exceeds interval.
  const auto s = scenario("tiny-llama-2x-h100.yaml");
  const auto result = simulate(s);
  const std::size_t modules = s.model.modules.size();
  const std::size_t per_iteration = 2 /*ranks*/ * 2 /*phases*/ * (modules - 1);
  EXPECT_EQ(result.metrics.samples.size(), per_iteration * 6);
  for (const auto& sample : result.metrics.samples) {
    EXPECT_GE(sample.wait_ns, 0);
    EXPECT_LE(sample.wait_ns, sample.interval_ns);
    ASSERT_EQ(sample.extra.size(), 3u);  // host_wait_ns, host_interval_ns, peak_reserved_bytes
  }
  EXPECT_EQ(result.metrics.buckets.size(), 2u * 6);
}

// With the host's per-kernel costs at 0, so that no host-issue stall (which depends on how much
// work is queued, and so on the schedule) enters the compute spans.
std::vector<std::string> free_issue(std::vector<std::string> overrides) {
  overrides.push_back("cluster.calibration.forward_op_host_us=0");
  overrides.push_back("cluster.calibration.backward_op_host_us=0");
  return overrides;
}

TEST(Simulation, ContentionSlowsOverlappedComputeAndIsOffAtZero) {
  const auto with = simulate(scenario("default.yaml", free_issue({})));
  const auto without = simulate(scenario("default.yaml", free_issue({"cluster.calibration.contention_compute_factor=0",
                                                                     "cluster.calibration.contention_collective_factor=0"})));
  const auto only_compute =
      simulate(scenario("default.yaml", free_issue({"cluster.calibration.contention_collective_factor=0"})));
  const auto s_with = pc::summarize(with.metrics, 2);
  const auto s_without = pc::summarize(without.metrics, 2);
  const auto s_compute = pc::summarize(only_compute.metrics, 2);
  EXPECT_GT(s_with.steady_step_time_ns, s_without.steady_step_time_ns);
  EXPECT_GT(s_compute.steady_step_time_ns, s_without.steady_step_time_ns);
  // Off means off: the compute kernels keep exactly their modelled durations.
  for (std::size_t i = 0; i < without.metrics.iterations.size(); ++i) {
    EXPECT_LE(without.metrics.iterations[i].compute_ns, with.metrics.iterations[i].compute_ns);
  }
  const auto compute_model_only = simulate(scenario(
      "default.yaml", free_issue({"cluster.calibration.contention_compute_factor=0",
                                  "cluster.calibration.contention_collective_factor=0", "zero.stage3_prefetch_bucket_size=0"})));
  EXPECT_EQ(compute_model_only.metrics.iterations.back().compute_ns, without.metrics.iterations.back().compute_ns)
      << "compute time must not depend on overlap when contention is off";
}

TEST(Simulation, SharedCoresContention) {
  // The host scenario (2 ranks on one node) under processor sharing: with a core per piece of
  // work nothing slows, exactly as with the contention factors at 0; fewer cores, slower steps.
  // The host-thread device launches from C++: its host costs per kernel are a launch's.
  const std::vector<std::string> off = free_issue({"cluster.calibration.contention_compute_factor=0",
                                                   "cluster.calibration.contention_collective_factor=0"});
  const auto step = [](const std::vector<std::string>& overrides) {
    return pc::summarize(simulate(scenario("host/tiny-llama-host.yaml", overrides)).metrics, 1).steady_step_time_ns;
  };
  const auto cores = [](int n) {
    return free_issue({"cluster.calibration.contention_model=shared_cores",
                       "cluster.calibration.shared_cores=" + std::to_string(n)});
  };
  const std::int64_t free_ns = step(off);
  EXPECT_EQ(step(cores(64)), free_ns);
  const std::int64_t two = step(cores(2)), one = step(cores(1));
  EXPECT_GT(two, free_ns);
  EXPECT_GT(one, two);
  // One core runs the whole node's work one piece at a time: at least both ranks' compute.
  const auto one_core = simulate(scenario("host/tiny-llama-host.yaml", cores(1)));
  const auto free_run = simulate(scenario("host/tiny-llama-host.yaml", off));
  EXPECT_GE(one_core.metrics.iterations.back().step_time_ns, 2 * free_run.metrics.iterations.back().compute_ns);
}

TEST(Simulation, PeakReservedMemoryGrowsWithTheStaticBucket) {
  // Llama-2-13B on 8x A100: bigger prefetch buckets keep more gathered parameters (and, while a
  // coalesced bucket is copied out, twice its size) alive at once. The job runs at the device's
  // capacity, where the allocator releases its cache and retries, so the reserved peaks of
  // neighbouring buckets differ by fragmentation (tens of MiB either way, with the host's timing):
  // reserved memory is compared between the smallest and the largest bucket only.
  std::int64_t previous_gathered = 0;
  std::int64_t smallest_reserved = 0;
  for (const char* bucket : {"1e6", "2e8", "1e9"}) {
    const auto result = simulate(scenario("llama-2-13b-grad-accum.yaml",
                                          {"training.iterations=3", "training.warmup_iterations=1",
                                           std::string("zero.stage3_prefetch_bucket_size=") + bucket}));
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    const auto stats = pc::summarize(result.metrics, 1);
    EXPECT_GT(stats.peak_gathered_param_bytes, previous_gathered) << "bucket " << bucket;
    EXPECT_GE(stats.peak_reserved_bytes, stats.peak_allocated_bytes);
    if (smallest_reserved == 0) smallest_reserved = stats.peak_reserved_bytes;
    if (std::string(bucket) == "1e9") {
      EXPECT_GT(stats.peak_reserved_bytes, smallest_reserved);
    }
    previous_gathered = stats.peak_gathered_param_bytes;
  }
}

TEST(Simulation, OutOfMemoryStopsTheRunAndSaysWhere) {
  const auto s = pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/defects/oom-large-bucket.yaml", {},
                                   pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  const auto result = simulate(s);
  EXPECT_EQ(result.status, pc::RunStatus::kOutOfMemory);
  for (const char* part : {"iteration 2", "module model.layers.", "requested ", "allocated ", "reserved "}) {
    EXPECT_NE(result.message.find(part), std::string::npos) << part << " missing in: " << result.message;
  }
  EXPECT_EQ(result.metrics.iterations.size(), 1u);
  // The same job with DeepSpeed's default bucket fits.
  const auto fits = simulate(scenario("default.yaml", {"training.micro_batch=3", "training.iterations=3",
                                                       "training.warmup_iterations=1"}));
  EXPECT_EQ(fits.status, pc::RunStatus::kOk) << fits.message;
}

namespace {

// Default scenario (Llama-2-7B, 8x H100) shortened to three iterations: 1 records, 2 and 3
// prefetch from the complete trace.
ps::WorldResult simulate_default(std::vector<std::string> overrides) {
  overrides.push_back("training.iterations=3");
  overrides.push_back("training.warmup_iterations=1");
  return simulate(scenario("default.yaml", std::move(overrides)));
}

std::int64_t forward_phase_samples(const pc::Metrics& metrics, int iteration) {
  return std::count_if(metrics.samples.begin(), metrics.samples.end(), [&](const pc::TimingSample& sample) {
    return sample.iteration == iteration && sample.rank == 0 && sample.phase == pc::Phase::kForward;
  });
}

}  // namespace

// Every Hugging Face family the project builds checkpoints its decoder layers (issue 45: seven of
// ten ignored the setting): with checkpointing on, less memory at the peak and a longer step.
TEST(Simulation, ActivationCheckpointingWorksForEveryHfFamily) {
  const std::filesystem::path hf = std::filesystem::path(PREFETCHLAB_SOURCE_DIR) / "models" / "hf";
  int families = 0;
  for (const auto& entry : std::filesystem::directory_iterator(hf)) {
    if (entry.path().extension() != ".json") continue;
    ++families;
    // 32 ranks, so that Mixtral-8x7B's model states fit.
    const std::vector<std::string> common{"model=" + entry.path().string(), "training.seq_len=512",
                                          "training.iterations=3", "training.warmup_iterations=1",
                                          "cluster.hardware=h100-sxm-cluster", "cluster.nodes=4"};
    auto on = common;
    on.push_back("training.activation_checkpointing=true");
    // Identical ranks, simulated once (as run does).
    const auto collapsed = [](const pc::Scenario& s) {
      ps::World world(s, /*record_trace=*/false, ps::RankSimulation::kCollapseIdentical);
      return world.run();
    };
    const auto plain = collapsed(scenario("default.yaml", common));
    const auto checkpointed = collapsed(scenario("default.yaml", on));
    ASSERT_EQ(plain.status, pc::RunStatus::kOk) << entry.path() << ": " << plain.message;
    ASSERT_EQ(checkpointed.status, pc::RunStatus::kOk) << entry.path() << ": " << checkpointed.message;
    const auto plain_stats = pc::summarize(plain.metrics, 1);
    const auto checkpointed_stats = pc::summarize(checkpointed.metrics, 1);
    EXPECT_LT(checkpointed_stats.peak_allocated_bytes, plain_stats.peak_allocated_bytes) << entry.path();
    EXPECT_GT(checkpointed_stats.steady_step_time_ns, plain_stats.steady_step_time_ns) << entry.path();
  }
  EXPECT_GE(families, 10);
}

TEST(Simulation, ActivationCheckpointingTradesStepTimeForMemory) {
  const auto plain = simulate_default({});
  const auto checkpointed = simulate_default({"training.activation_checkpointing=true"});
  ASSERT_EQ(plain.status, pc::RunStatus::kOk) << plain.message;
  ASSERT_EQ(checkpointed.status, pc::RunStatus::kOk) << checkpointed.message;
  const auto plain_stats = pc::summarize(plain.metrics, 1);
  const auto checkpointed_stats = pc::summarize(checkpointed.metrics, 1);
  // Only each decoder layer's input stays alive across the forward pass instead of every
  // module's saved tensors: at 4096 tokens per rank that is about half of peak memory.
  EXPECT_LT(checkpointed_stats.peak_allocated_bytes, plain_stats.peak_allocated_bytes * 3 / 4);
  EXPECT_LT(checkpointed_stats.peak_reserved_bytes, plain_stats.peak_reserved_bytes);
  // The recomputed forward costs roughly one more forward pass.
  EXPECT_GT(checkpointed_stats.steady_step_time_ns, plain_stats.steady_step_time_ns * 11 / 10);

  // The recomputed forward runs in backward with DeepSpeed's hooks: its modules are fetched again
  // (forward-phase fetches during backward), in the recording iteration and from the complete
  // trace alike — at least one per decoder layer.
  const int layers = 32;
  for (int iteration : {1, 3}) {
    EXPECT_GE(forward_phase_samples(checkpointed.metrics, iteration),
              forward_phase_samples(plain.metrics, iteration) + layers)
        << "iteration " << iteration;
  }
  // While recording (iteration 1, no prefetch) each layer's parameters are released after the
  // recompute and gathered a third time for its backward: 1 + 2 x (layers' share) of the plain
  // volume. From the complete trace the prefetch scan pops the backward uses of parameters the
  // recompute just gathered (already available, so free) and marks them as fetched for that later
  // step, so they are kept: the recompute's gathers replace the backward's.
  const auto& plain_recording = plain.metrics.iterations[0];
  const auto& checkpointed_recording = checkpointed.metrics.iterations[0];
  EXPECT_GT(checkpointed_recording.gathered_numel, plain_recording.gathered_numel * 14 / 10);
  EXPECT_GT(checkpointed_recording.all_gather_count, plain_recording.all_gather_count);
  EXPECT_GE(checkpointed.metrics.iterations[2].gathered_numel, plain.metrics.iterations[2].gathered_numel);
  // The forward pass itself is unchanged; the extra work is in backward.
  EXPECT_GT(checkpointed.metrics.iterations[2].backward_ns, plain.metrics.iterations[2].backward_ns);
}

TEST(Simulation, ParameterOffloadAddsHostCopiesAndFreesDeviceShards) {
  const auto plain = simulate_default({});
  const auto offloaded = simulate_default({"zero.offload_param.device=cpu"});
  ASSERT_EQ(offloaded.status, pc::RunStatus::kOk) << offloaded.message;
  const auto plain_stats = pc::summarize(plain.metrics, 1);
  const auto offloaded_stats = pc::summarize(offloaded.metrics, 1);
  // 6.7e9 parameters / 8 ranks x 2 bytes of bf16 shard leave the device.
  EXPECT_LT(offloaded_stats.peak_allocated_bytes, plain_stats.peak_allocated_bytes - (1LL << 30));
  // Every fetch first copies its shards over PCIe on the all-gather stream: more of the
  // communication shows.
  EXPECT_GT(offloaded_stats.mean_exposed_comm_ns, plain_stats.mean_exposed_comm_ns);
  EXPECT_GT(offloaded_stats.steady_step_time_ns, plain_stats.steady_step_time_ns);
}

TEST(Simulation, OptimizerOffloadRunsAdamOnTheHost) {
  const auto plain = simulate_default({});
  const auto offloaded = simulate_default({"zero.offload_optimizer.device=cpu"});
  ASSERT_EQ(offloaded.status, pc::RunStatus::kOk) << offloaded.message;
  const auto plain_stats = pc::summarize(plain.metrics, 1);
  const auto offloaded_stats = pc::summarize(offloaded.metrics, 1);
  // fp32 master weights and both Adam moments (12 bytes per parameter of the shard) leave the
  // device: about 10 GB per rank for Llama-2-7B on 8 ranks.
  EXPECT_LT(offloaded_stats.peak_allocated_bytes, plain_stats.peak_allocated_bytes - 8'000'000'000LL);
  // Adam at the CPU's rate over 840 M elements dwarfs the GPU step.
  EXPECT_GT(offloaded.metrics.iterations[2].optimizer_ns, 10 * plain.metrics.iterations[2].optimizer_ns);
  // A slower CPU makes the step slower still: the rate is really used.
  const auto slower = simulate_default({"zero.offload_optimizer.device=cpu", "cluster.calibration.cpu_adam_node_elements_per_s=5e8"});
  EXPECT_GT(slower.metrics.iterations[2].optimizer_ns, offloaded.metrics.iterations[2].optimizer_ns);
}

// A node's ranks run CPU Adam at once on its cores: one node steps its whole model at the node's
// rate however many GPUs split it (4 ranks: shards twice as large, half as many sharing).
TEST(Simulation, OptimizerOffloadSharesTheNodesCpu) {
  const auto eight = simulate_default({"zero.offload_optimizer.device=cpu"});
  const auto four = simulate_default({"zero.offload_optimizer.device=cpu", "cluster.gpus_per_node=4"});
  ASSERT_EQ(eight.status, pc::RunStatus::kOk) << eight.message;
  ASSERT_EQ(four.status, pc::RunStatus::kOk) << four.message;
  const double eight_s = static_cast<double>(eight.metrics.iterations[2].optimizer_ns) * 1e-9;
  const double four_s = static_cast<double>(four.metrics.iterations[2].optimizer_ns) * 1e-9;
  EXPECT_NEAR(four_s / eight_s, 1.0, 0.05);
  // Llama-2-7B's 6.74e9 parameters at the default 3.9e9 per second: about 1.7 s of CPU Adam.
  EXPECT_GT(eight_s, 1.6);
  EXPECT_LT(eight_s, 1.9);
}

namespace {

// The single-GPU parameter-offload scenario without prefetch or parameter reuse: each module's
// parameters are fetched when it runs and released after it, so what is resident when is known.
pc::Scenario one_gpu(std::vector<std::string> overrides) {
  overrides.push_back("zero.stage3_prefetch_bucket_size=0");
  overrides.push_back("zero.stage3_max_reuse_distance=0");
  return scenario("host/tiny-llama-offload-1gpu.yaml", std::move(overrides));
}

struct TracedRun {
  ps::WorldResult result;
  std::vector<ps::TraceSpan> host_copies;  // the host<->device copy kernels of offload
};

TracedRun simulate_traced(const pc::Scenario& s) {
  ps::World world(s, /*record_trace=*/true);
  TracedRun run{world.run(), {}};
  world.trace().for_each_span([&](const ps::TraceSpan& span) {
    if (span.kind == ps::SpanKind::kKernel && world.labels().text(span.label) == "host<->device copy (offload)") {
      run.host_copies.push_back(span);
    }
  });
  return run;
}

// What copying `numel` bf16 parameter elements up over the host link takes.
double host_copy_ns(const pc::Scenario& s, std::int64_t numel) {
  return static_cast<double>(numel * 2) / pc::host_to_device_bytes_per_s(s.cluster.hardware) * 1e9;
}

}  // namespace

// World size 1 with zero.offload_param: DeepSpeed's no-gather handle copies each fetched
// parameter from its pinned host shard into a new device tensor on the all-gather stream
// (NoGatherCoalescedHandle.__init__, `ds_tensor.data.to(device, non_blocking=True)`), and its
// first wait synchronises the host with that stream. The copies, their buffers and their time
// all show.
TEST(Simulation, OneGpuParameterOffloadCopiesEachFetchedParameterIntoItsOwnBuffer) {
  const pc::Scenario s = one_gpu({});
  const auto plain = simulate_traced(one_gpu({"zero.offload_param.device=none"}));
  const auto offloaded = simulate_traced(s);
  ASSERT_EQ(plain.result.status, pc::RunStatus::kOk) << plain.result.message;
  ASSERT_EQ(offloaded.result.status, pc::RunStatus::kOk) << offloaded.result.message;
  // tiny-llama has 3,548,416 parameters: embed_tokens and lm_head 4096 x 256 = 1,048,576 each;
  // per layer q and o 65,536, k and v 32,768, gate/up/down 176,128 each, two norms of 256; the
  // final norm 256. Persistent (numel <= 1000): the five norms.
  ASSERT_EQ(s.model.total_numel(), 3'548'416);
  const auto& plain_its = plain.result.metrics.iterations;
  const auto& offloaded_its = offloaded.result.metrics.iterations;
  ASSERT_EQ(plain_its.size(), offloaded_its.size());
  for (std::size_t i = 0; i < offloaded_its.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    // Peak gathered: the largest module's weight (embed_tokens or lm_head, 1,048,576 x 2 =
    // 2,097,152 bytes), reached while lm_head runs. From the complete trace on (iteration 2),
    // the persistent norms stay gathered beside it (5 x 256 x 2 = 2,560 bytes, re-gathered right
    // after each optimizer step): 2,099,712 bytes; while recording (iteration 1) every module's
    // parameters are released after it, norms included. Without offload each parameter is a
    // view of its device shard: nothing is gathered.
    const std::int64_t persistent_bytes = offloaded_its[i].trace_mode == pc::TraceMode::kComplete ? 2'560 : 0;
    EXPECT_EQ(offloaded_its[i].peak_gathered_param_bytes, 2'097'152 + persistent_bytes);
    EXPECT_EQ(plain_its[i].peak_gathered_param_bytes, 0);
    // Peak allocated: the bf16 shards (3,548,416 x 2 = 7,096,832 bytes, one flat tensor) leave
    // the device, and at the peak (around lm_head) its buffer and the resident norms above are
    // held instead (every size a multiple of the allocator's 512-byte rounding): 4,999,680
    // bytes less while recording, 4,997,120 from the complete trace on.
    EXPECT_EQ(plain_its[i].peak_allocated_bytes - offloaded_its[i].peak_allocated_bytes,
              7'096'832 - 2'097'152 - persistent_bytes);
  }
  // One copy per fetched parameter, on the all-gather stream, of its full bytes at the host
  // link's rate (each rounded to a whole nanosecond).
  EXPECT_TRUE(plain.host_copies.empty());
  std::map<std::int32_t, std::int64_t> copy_ns, copies;  // per iteration
  for (const auto& span : offloaded.host_copies) {
    EXPECT_EQ(span.track, ps::Track::kAllGather);
    copy_ns[span.iteration] += span.duration_ns;
    ++copies[span.iteration];
  }
  for (const auto& it : offloaded_its) {
    EXPECT_GT(copies[it.iteration], 0);
    EXPECT_NEAR(static_cast<double>(copy_ns[it.iteration]), host_copy_ns(s, it.gathered_numel),
                static_cast<double>(copies[it.iteration]))
        << "iteration " << it.iteration;
  }
  EXPECT_GT(pc::summarize(offloaded.result.metrics, 1).steady_step_time_ns,
            pc::summarize(plain.result.metrics, 1).steady_step_time_ns);
  // With compute and the host free, nothing hides a copy: the host waits for each in turn, so
  // every copy adds to the step. (At DeepSpeed's host costs the host's own work between a
  // prefetch round's copies and their waits overlaps them.)
  const auto host_bound_plain = simulate(one_gpu({"zero.offload_param.device=none", "cluster.calibration.compute_time_scale=0",
                                                  "cluster.calibration.host_speed=inf"}));
  const auto host_bound = simulate(one_gpu({"cluster.calibration.compute_time_scale=0", "cluster.calibration.host_speed=inf"}));
  ASSERT_EQ(host_bound.status, pc::RunStatus::kOk) << host_bound.message;
  for (std::size_t i = 0; i < host_bound.metrics.iterations.size(); ++i) {
    const auto& it = host_bound.metrics.iterations[i];
    // (Each copy is rounded to a whole nanosecond.)
    EXPECT_GE(static_cast<double>(it.step_time_ns - host_bound_plain.metrics.iterations[i].step_time_ns),
              host_copy_ns(s, it.gathered_numel) - static_cast<double>(copies[it.iteration]))
        << "iteration " << it.iteration;
  }
}

// World size 1 without offload: the no-gather handle's `.to(device)` of a device tensor is a
// no-op (no copy, no buffer); its wait still synchronises the host with the current stream. With
// overlap_comm=false that stream is the compute stream, so the host can no longer queue the
// next module's work ahead of the running one: compute idles for the host's hook and launch
// time at every fetch. With the all-gather stream (overlap_comm=true) there is nothing to wait
// for beyond the optimizer step.
TEST(Simulation, OneGpuWithoutOffloadAddsOnlyTheNoGatherHostSynchronisation) {
  const auto overlapped = simulate_traced(one_gpu({"zero.offload_param.device=none"}));
  const pc::Scenario serial_scenario = one_gpu({"zero.offload_param.device=none", "zero.overlap_comm=false"});
  const auto serial = simulate_traced(serial_scenario);
  const std::int64_t launch_ns = serial_scenario.cluster.calibration.kernel_launch_ns;
  ASSERT_EQ(overlapped.result.status, pc::RunStatus::kOk) << overlapped.result.message;
  ASSERT_EQ(serial.result.status, pc::RunStatus::kOk) << serial.result.message;
  EXPECT_TRUE(overlapped.host_copies.empty());
  EXPECT_TRUE(serial.host_copies.empty());
  const auto& a = overlapped.result.metrics.iterations;
  const auto& b = serial.result.metrics.iterations;
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    EXPECT_EQ(a[i].peak_gathered_param_bytes, 0);
    EXPECT_EQ(b[i].peak_gathered_param_bytes, 0);
    EXPECT_EQ(a[i].peak_allocated_bytes, b[i].peak_allocated_bytes);
    // Besides the reduce path's partition copies that overlap_comm=false moves onto the compute
    // stream, each handle's first wait leaves compute idle for at least the launch of the
    // module's next kernel (one handle per gather here). Without the synchronisation the host
    // stays ahead and the two differ by little more than those copies.
    EXPECT_GE((b[i].step_time_ns - a[i].step_time_ns) - (b[i].compute_ns - a[i].compute_ns),
              b[i].all_gather_count * launch_ns);
  }
}

// Both offloads: the 16-bit partitions live in host memory (stage3.py's
// param_groups_fp16_flat_cpu_memory), so after CPU Adam nothing goes up to the device; with the
// optimizer alone offloaded the updated shard does go up, once per optimizer step, on the
// compute stream.
TEST(Simulation, BothOffloadsCopyNothingUpAfterTheOptimizer) {
  for (const bool params_too : {false, true}) {
    SCOPED_TRACE(params_too ? "parameters and optimizer offloaded" : "optimizer offloaded");
    std::vector<std::string> overrides{"zero.offload_optimizer.device=cpu",
                                       params_too ? "zero.offload_param.device=cpu" : "zero.offload_param.device=none"};
    for (const char* world : {"1", "2"}) {
      SCOPED_TRACE(std::string("gpus_per_node ") + world);
      overrides.push_back(std::string("cluster.gpus_per_node=") + world);
      const auto run = simulate_traced(scenario("host/tiny-llama-offload-1gpu.yaml", overrides));
      overrides.pop_back();
      ASSERT_EQ(run.result.status, pc::RunStatus::kOk) << run.result.message;
      int optimizer_steps = 0;
      for (const auto& it : run.result.metrics.iterations) optimizer_steps += it.optimizer_step ? 1 : 0;
      ASSERT_GT(optimizer_steps, 0);
      const auto up_on_compute = std::count_if(run.host_copies.begin(), run.host_copies.end(),
                                               [](const ps::TraceSpan& span) { return span.rank == 0 && span.track == ps::Track::kCompute; });
      EXPECT_EQ(up_on_compute, params_too ? 0 : optimizer_steps);
    }
  }
}

namespace {

// Peak allocated as the published formulas put it together (docs/memory.md "Memory against the
// formulas"): ZeRO-3 model states 16 bytes/parameter over the ranks (Rajbhandari et al. 2020,
// K = 12), the contiguous reduce bucket (reduce_bucket_size bf16 elements), the simulator's own
// peak of gathered parameters, per-layer activations, and the fp32 logits the loss keeps.
double formula_peak_allocated_bytes(const pc::Scenario& s, double activation_bytes_per_layer,
                                    std::int64_t peak_gathered_param_bytes) {
  const auto& m = s.model;
  const auto ranks = static_cast<double>(s.cluster.world_size());
  const double model_states = 16.0 * static_cast<double>(m.total_numel()) / ranks;
  const double reduce_bucket = 2.0 * static_cast<double>(s.zero.reduce_bucket_numel);
  const double tokens = static_cast<double>(s.training.micro_batch * s.training.seq_len);
  const double logits = tokens * static_cast<double>(m.vocab_size) * 4;
  return model_states + reduce_bucket + static_cast<double>(peak_gathered_param_bytes) +
         static_cast<double>(m.num_layers) * activation_bytes_per_layer + logits;
}

}  // namespace

TEST(Simulation, PeakAllocatedAgreesWithTheZeroAndActivationFormulas) {
  {
    // GPT-2 small, 8x A100, micro-batch 8 x 1024, eager attention: Korthikanti's sbh(34 + 5as/h)
    // per block, plus the three 4h-wide tensors HF's unfused gelu_new keeps beyond its input
    // (24 sbh).
    const auto s = scenario("gpt2-small-divergence.yaml",
                            {"training.iterations=3", "divergence=[]", "training.attention=eager"});
    const auto result = simulate(s);
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    const auto stats = pc::summarize(result.metrics, 1);
    const double sbh = static_cast<double>(s.training.seq_len * s.training.micro_batch * s.model.hidden_size);
    const double as_over_h = static_cast<double>(s.model.num_heads * s.training.seq_len) /
                             static_cast<double>(s.model.hidden_size);
    const double formula = formula_peak_allocated_bytes(s, sbh * (34 + 24 + 5 * as_over_h), stats.peak_gathered_param_bytes);
    EXPECT_NEAR(static_cast<double>(stats.peak_allocated_bytes) / formula, 1.0, 0.02);
  }
  {
    // Llama-2-7B, 8x H100, 1 x 4096: our itemised Llama estimate in the manner of Korthikanti et al. (arXiv:2205.05198),
    // sbh(14 + 4kv/a) + 6sbf + 4asb per layer.
    const auto s = scenario("default.yaml", {"training.iterations=3", "training.warmup_iterations=1"});
    const auto result = simulate(s);
    ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
    const auto stats = pc::summarize(result.metrics, 1);
    const auto& m = s.model;
    const double sb = static_cast<double>(s.training.seq_len * s.training.micro_batch);
    const double per_layer = sb * (static_cast<double>(m.hidden_size) *
                                       (14 + 4.0 * static_cast<double>(m.num_kv_heads) / static_cast<double>(m.num_heads)) +
                                   6.0 * static_cast<double>(m.intermediate_size) + 4.0 * static_cast<double>(m.num_heads));
    const double formula = formula_peak_allocated_bytes(s, per_layer, stats.peak_gathered_param_bytes);
    EXPECT_NEAR(static_cast<double>(stats.peak_allocated_bytes) / formula, 1.0, 0.02);
  }
}

TEST(Simulation, TheReduceScatterInterleavesIntoANewFlatBuffer) {
  // reduce_scatter_coalesced (deepspeedai/DeepSpeed deepspeed/runtime/comm/coalesced_collectives.py) interleaves a bucket's padded chunks into a new flat
  // buffer (torch.cat) on the reduce stream. With one bucket holding every gradient (flushed at
  // the end of backward), allocated memory steps up once in the iteration by exactly that
  // buffer: the sum of the gradients, each padded to a multiple of the world size.
  const auto s = scenario("tiny-llama-2x-h100.yaml", {"training.iterations=2", "training.warmup_iterations=1",
                                                      "zero.reduce_bucket_size=1e9"});
  const auto result = simulate(s);
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  const std::int64_t world = s.cluster.world_size();
  std::int64_t padded_numel = 0;
  for (const auto& p : s.model.params) padded_numel += (p.numel + world - 1) / world * world;
  const std::int64_t flat_bytes = (padded_numel * 2 + 511) / 512 * 512;  // bf16, 512-byte blocks
  int steps_of_flat_size = 0;  // in iteration 2 (the model states come before)
  const pc::MemoryPoint* previous = nullptr;
  for (const auto& point : result.metrics.memory) {
    if (point.rank != 0 || point.time_ns < result.metrics.iterations[1].start_ns) continue;
    if (previous && point.allocated_bytes - previous->allocated_bytes == flat_bytes) ++steps_of_flat_size;
    previous = &point;
  }
  EXPECT_EQ(steps_of_flat_size, 1) << flat_bytes << " bytes";
}

// Per-rank state stays compact (issue 24): a finished collective's call is kept only for the
// ranks whose trace is recorded (trace.json names what each moved); the others' are forgotten,
// so the communicator does not grow with collectives x ranks. Traced ranks keep every call.
TEST(Simulation, OnlyTracedRanksKeepTheirFinishedCollectiveCalls) {
  const auto s = pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/tiny-llama-2x-h100.yaml",
                                   {"output.trace_ranks=[1]"}, pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  ps::World world(s, /*record_trace=*/true);
  const auto result = world.run();
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  EXPECT_GT(world.communicator().call(1, 0).bytes, 0);
  EXPECT_THROW((void)world.communicator().call(0, 0), std::logic_error);
  // Without a trace no rank keeps them; the figures are the same.
  ps::World untraced(s, /*record_trace=*/false);
  const auto again = untraced.run();
  EXPECT_THROW((void)untraced.communicator().call(1, 0), std::logic_error);
  ASSERT_EQ(again.metrics.iterations.size(), result.metrics.iterations.size());
  for (std::size_t i = 0; i < again.metrics.iterations.size(); ++i) {
    EXPECT_EQ(again.metrics.iterations[i].step_time_ns, result.metrics.iterations[i].step_time_ns);
  }
}

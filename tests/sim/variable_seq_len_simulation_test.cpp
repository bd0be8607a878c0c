// Sequence lengths that change (issue 23, item 3) in the simulator: each iteration runs at its
// own length (compute, activations, MoE tokens), all ranks alike, the same lengths for the same
// seed; throughput counts the tokens that actually ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/metrics/metrics.hpp"
#include "core/scenario/expert_routing.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"

namespace pc = prefetchlab::core;
namespace ps = prefetchlab::sim;

namespace {

pc::Scenario tiny(std::vector<std::string> overrides) {
  static const std::vector<std::string> kQuiet = {"output.trace=false", "output.memory_timeline=false"};
  overrides.insert(overrides.end(), kQuiet.begin(), kQuiet.end());
  return pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/tiny-llama-2x-h100.yaml", overrides,
                           pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
}

ps::WorldResult simulate(const pc::Scenario& s) {
  ps::World world(s, /*record_trace=*/false);
  return world.run();
}

const std::string kMix = "training.seq_len={choices: [128, 1024]}";

}  // namespace

TEST(VariableSeqLenSimulation, SameSeedSameLengthsOnEveryRun) {
  const auto s = tiny({kMix, "training.iterations=12"});
  const auto a = simulate(s);
  const auto b = simulate(tiny({kMix, "training.iterations=12"}));
  ASSERT_EQ(a.status, pc::RunStatus::kOk) << a.message;
  ASSERT_EQ(a.metrics.iterations.size(), 12u);
  const auto drawn = s.training.seq_len_distribution.draw(s.noise.seed, 12);
  std::map<std::int64_t, int> seen;
  for (std::size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(a.metrics.iterations[i].seq_len, drawn[i]);
    EXPECT_EQ(b.metrics.iterations[i].seq_len, drawn[i]);
    EXPECT_EQ(a.metrics.iterations[i].step_time_ns, b.metrics.iterations[i].step_time_ns);
    ++seen[drawn[i]];
  }
  EXPECT_EQ(seen.size(), 2u) << "seed 1 drew one length only: pick a seed that mixes them";
  // Another seed, other lengths.
  const auto other = tiny({kMix, "training.iterations=12", "noise.seed=2"});
  EXPECT_NE(other.training.seq_len_distribution.draw(other.noise.seed, 12), drawn);
  EXPECT_TRUE(a.metrics.facts.seq_len_varies);
  EXPECT_EQ(a.metrics.facts.seq_len, 1024);
}

TEST(VariableSeqLenSimulation, ComputeAndActivationsFollowEachIterationsLength) {
  // GPT-2 medium with 8 sequences a rank: kernels long enough that compute shows the length
  // (tiny-llama's are hidden behind their host launches).
  const std::vector<std::string> medium = {"model=gpt2-medium", "training.micro_batch=8", "training.iterations=12",
                                           "zero.stage3_prefetch_bucket_size=5e7"};
  const auto with = [&](const std::string& seq_len) {
    std::vector<std::string> overrides = medium;
    overrides.push_back(seq_len);
    return simulate(tiny(overrides));
  };
  const auto mixed = with(kMix);
  const auto short_run = with("training.seq_len=128");
  const auto long_run = with("training.seq_len=1024");
  ASSERT_EQ(mixed.status, pc::RunStatus::kOk) << mixed.message;
  ASSERT_EQ(short_run.status, pc::RunStatus::kOk) << short_run.message;
  ASSERT_EQ(long_run.status, pc::RunStatus::kOk) << long_run.message;
  // Past the trace-recording iteration, an iteration's compute is its own length's, as in a run
  // at that length throughout (the compute stream's busy time; no noise here).
  int compared = 0;
  for (std::size_t i = 1; i < 12; ++i) {
    const auto& it = mixed.metrics.iterations[i];
    const auto& fixed = (it.seq_len == 128 ? short_run : long_run).metrics.iterations[i];
    EXPECT_NEAR(static_cast<double>(it.compute_ns), static_cast<double>(fixed.compute_ns),
                0.02 * static_cast<double>(fixed.compute_ns))
        << "iteration " << it.iteration << " at " << it.seq_len;
    ++compared;
  }
  EXPECT_EQ(compared, 11);
  // Longer sequences: more compute and more activations at the iteration's peak.
  std::int64_t short_compute = 0, long_compute = std::numeric_limits<std::int64_t>::max();
  std::int64_t short_peak = 0, long_peak = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 1; i < 12; ++i) {
    const auto& it = mixed.metrics.iterations[i];
    if (it.seq_len == 128) {
      short_compute = std::max(short_compute, it.compute_ns);
      short_peak = std::max(short_peak, it.peak_allocated_bytes);
    } else {
      long_compute = std::min(long_compute, it.compute_ns);
      long_peak = std::min(long_peak, it.peak_allocated_bytes);
    }
  }
  EXPECT_GT(2 * long_compute, 3 * short_compute);
  EXPECT_GT(long_peak, short_peak);
  // The whole run's peak is the long iterations', not more: memory is planned at the longest
  // length, but each iteration allocates its own.
  const auto mixed_stats = pc::summarize(mixed.metrics, 2);
  const auto long_stats = pc::summarize(long_run.metrics, 2);
  const auto short_stats = pc::summarize(short_run.metrics, 2);
  EXPECT_GT(mixed_stats.peak_allocated_bytes, short_stats.peak_allocated_bytes);
  EXPECT_LE(mixed_stats.peak_allocated_bytes, long_stats.peak_allocated_bytes);
}

TEST(VariableSeqLenSimulation, TokensPerSecondCountsTheTokensThatRan) {
  const auto result = simulate(tiny({kMix, "training.iterations=8", "training.warmup_iterations=2"}));
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  const auto stats = pc::summarize(result.metrics, 2);
  EXPECT_TRUE(stats.steady_is_mean_over_lengths);
  // By hand: iterations 3..8, 2 ranks x micro_batch 2 sequences each.
  double tokens = 0, flops = 0;
  std::int64_t time_ns = 0;
  for (const auto& it : result.metrics.iterations) {
    if (it.iteration <= 2) continue;
    tokens += 2.0 * 2.0 * static_cast<double>(it.seq_len);
    flops += static_cast<double>(it.model_flops_per_gpu);
    time_ns += it.step_time_ns;
  }
  const double seconds = static_cast<double>(time_ns) * 1e-9;
  EXPECT_DOUBLE_EQ(stats.tokens_per_second, tokens / seconds);
  EXPECT_DOUBLE_EQ(stats.samples_per_second, 6 * 4 / seconds);
  EXPECT_DOUBLE_EQ(stats.tflops_per_gpu, flops / seconds / 1e12);
  EXPECT_EQ(stats.steady_step_time_ns, time_ns / 6);  // the mean, not the median
  EXPECT_EQ(stats.steady_micro_batch_time_ns, time_ns / 6);
  // Not the nominal (longest) length's count.
  EXPECT_LT(stats.tokens_per_second, stats.samples_per_second * 1024 * 0.99);

  // Fixed lengths keep the median and the nominal count.
  const auto fixed = simulate(tiny({"training.iterations=8"}));
  const auto fixed_stats = pc::summarize(fixed.metrics, 2);
  EXPECT_FALSE(fixed_stats.steady_is_mean_over_lengths);
  EXPECT_DOUBLE_EQ(fixed_stats.tokens_per_second, fixed_stats.samples_per_second * 256);
}

// With grad_accum the figures are per optimizer step: totals over the steady steps' iterations.
TEST(VariableSeqLenSimulation, GradientAccumulationAveragesOptimizerSteps) {
  const auto result =
      simulate(tiny({kMix, "training.iterations=10", "training.warmup_iterations=2", "training.grad_accum=2"}));
  ASSERT_EQ(result.status, pc::RunStatus::kOk) << result.message;
  const auto stats = pc::summarize(result.metrics, 2);
  EXPECT_TRUE(stats.steady_is_mean_over_lengths);
  EXPECT_EQ(stats.steady_optimizer_steps, 4);  // steps (3,4) (5,6) (7,8) (9,10)
  double tokens = 0;
  std::int64_t time_ns = 0;
  for (const auto& it : result.metrics.iterations) {
    if (it.iteration <= 2) continue;
    tokens += 4.0 * static_cast<double>(it.seq_len);
    time_ns += it.step_time_ns;
  }
  EXPECT_EQ(stats.steady_step_time_ns, time_ns / 4);
  EXPECT_DOUBLE_EQ(stats.tokens_per_second, tokens / (static_cast<double>(time_ns) * 1e-9));
  EXPECT_DOUBLE_EQ(stats.samples_per_second, 4 * 2 * 4 / (static_cast<double>(time_ns) * 1e-9));
}

// MoE routes each iteration's own tokens (micro_batch x its length).
TEST(VariableSeqLenSimulation, MoeRoutesEachIterationsTokens) {
  const auto s = pc::load_scenario(std::string(PREFETCHLAB_SOURCE_DIR) + "/scenarios/moe/mixtral-8x7b-2-nodes.yaml",
                                   {"training.seq_len={choices: [128, 512]}", "training.iterations=8"},
                                   pc::BundledData::from_root(PREFETCHLAB_SOURCE_DIR));
  const pc::ExpertRouting routing(s);
  const auto lengths = s.training.seq_len_distribution.draw(s.noise.seed, 8);
  std::map<std::int64_t, std::vector<std::int64_t>> assigned_by_length;
  for (std::int64_t i = 1; i <= 8; ++i) {
    const std::int64_t length = lengths[static_cast<std::size_t>(i - 1)];
    EXPECT_EQ(routing.tokens_of(i), s.training.micro_batch * length);
    std::vector<std::int64_t> tokens;
    const std::int64_t dropped = routing.route(i, 0, tokens);
    // Each MoE layer hands out tokens x top_k assignments, kept or dropped over capacity.
    std::int64_t assigned = 0;
    for (const auto& layer : routing.layers()) {
      for (const int expert : layer.experts) assigned += tokens[static_cast<std::size_t>(expert)];
    }
    EXPECT_EQ(assigned + dropped,
              routing.tokens_of(i) * s.model.experts_per_token * static_cast<std::int64_t>(routing.layers().size()));
    assigned_by_length[length].push_back(assigned);
  }
  ASSERT_EQ(assigned_by_length.size(), 2u) << "the seed drew one length only";
  EXPECT_LT(*std::max_element(assigned_by_length[128].begin(), assigned_by_length[128].end()),
            *std::min_element(assigned_by_length[512].begin(), assigned_by_length[512].end()));
}

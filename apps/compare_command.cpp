#include "compare_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <thread>

#include "command_context.hpp"
#include "fidelity_band.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/scenario/scenario.hpp"
#include "sim/ranks/world.hpp"
#include "parallel_runner.hpp"
#include "static_bucket_grid.hpp"

namespace prefetchlab::apps {
namespace {

struct CompareOptions {
  std::vector<std::string> scenarios;
  std::vector<std::string> policies{"deepspeed_pr8431", "ema_threshold", "pace_search"};
  std::int64_t iterations = 40;
  std::string output;
  unsigned jobs = 0;
  int seeds = 3;  // noise seeds per configuration, where the scenario's noise varies with the seed
};

// What one simulated configuration produced.
struct Outcome {
  std::string label;
  std::int64_t bucket_numel = 0;  // the configured (starting) bucket
  core::RunStatus status = core::RunStatus::kOk;
  // Per finished optimizer step (of the first seed): grad_accum micro-batches each.
  std::vector<std::int64_t> step_ns;
  std::vector<int> step_last_iteration;  // the iteration each step ends with
  std::int64_t steady_ns = 0;         // median over the seeds of the last half's median
  double seed_spread = 0;             // (max - min) / median of the seeds' steady steps
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t final_bucket_numel = 0;
};

// The steady step: the median of the last half of the steps, or their mean where lengths vary
// (a median of a mix of lengths is one length's time; every configuration draws the same
// lengths from the same seed, so means compare like with like).
std::int64_t steady_of_last_half(const std::vector<std::int64_t>& steps, bool mean) {
  if (steps.empty()) return 0;
  std::vector<std::int64_t> tail(steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2), steps.end());
  if (!mean) return core::median_ns(tail);
  std::int64_t sum = 0;
  for (const std::int64_t step : tail) sum += step;
  return sum / static_cast<std::int64_t>(tail.size());
}

Outcome simulate_seed(const std::string& file, std::vector<std::string> overrides, std::string label) {
  overrides.push_back("output.trace=false");
  const core::Scenario scenario = core::load_scenario(file, overrides, bundled_data());
  sim::World world(scenario, false, sim::RankSimulation::kCollapseIdentical);
  // Only the iteration records are read: a sink that drops samples, buckets and memory points
  // keeps a large world's run small (a collapsed run gives a row set per rank of the job).
  sim::IterationSink sink;
  sink.on_iteration = [](const core::IterationRecord&, std::span<const core::TimingSample>,
                         std::span<const core::BucketRecord>) {};
  sink.on_memory = [](std::span<const core::MemoryPoint>) {};
  sink.wants_samples = false;
  const sim::WorldResult result = world.run(sink);
  Outcome outcome;
  outcome.label = std::move(label);
  outcome.bucket_numel = scenario.zero.prefetch_bucket_numel;
  outcome.status = result.status;
  for (const auto& step : core::optimizer_step_times(result.metrics.iterations, scenario.training.grad_accum)) {
    outcome.step_ns.push_back(step.time_ns);
    outcome.step_last_iteration.push_back(step.last_iteration);
  }
  for (const auto& it : result.metrics.iterations) {
    outcome.peak_reserved_bytes = std::max(outcome.peak_reserved_bytes, it.peak_reserved_bytes);
    outcome.final_bucket_numel = it.bucket_numel;
  }
  outcome.steady_ns = steady_of_last_half(outcome.step_ns, scenario.training.seq_len_distribution.varies());
  return outcome;
}

// Whether the scenario's noise draws anything from its seed: without jitter or timer noise
// every seed gives the same run, so one seed is all there is to measure.
bool seeds_vary(const core::NoiseConfig& noise) {
  return noise.compute_jitter > 0 || noise.host_jitter > 0 || noise.host_timer_noise_ns > 0;
}

// One configuration on `seeds` consecutive noise seeds from the scenario's own: its steady step
// is the seeds' median, so a best static bucket picked on one lucky seed does not win, and the
// spread says how far apart two configurations must be to differ at all.
Outcome simulate(const std::string& file, const std::vector<std::string>& overrides, const std::string& label,
                 std::uint64_t first_seed, int seeds) {
  Outcome outcome = simulate_seed(file, overrides, label);
  if (seeds <= 1) return outcome;
  std::vector<std::int64_t> steady{outcome.steady_ns};
  for (int s = 1; s < seeds; ++s) {
    std::vector<std::string> seeded = overrides;
    seeded.push_back("noise.seed=" + std::to_string(first_seed + static_cast<std::uint64_t>(s)));
    const Outcome other = simulate_seed(file, seeded, label);
    if (other.status != core::RunStatus::kOk) outcome.status = other.status;  // a seed that fails fails the row
    outcome.peak_reserved_bytes = std::max(outcome.peak_reserved_bytes, other.peak_reserved_bytes);
    steady.push_back(other.steady_ns);
  }
  const auto [low, high] = std::minmax_element(steady.begin(), steady.end());
  outcome.steady_ns = core::median_ns(steady);
  if (outcome.steady_ns > 0) {
    outcome.seed_spread = static_cast<double>(*high - *low) / static_cast<double>(outcome.steady_ns);
  }
  return outcome;
}

// Runs independent simulations on `threads` threads; results keep the order of `jobs`.
std::vector<Outcome> run_all(const std::vector<std::function<Outcome()>>& jobs, unsigned threads) {
  std::vector<std::optional<Outcome>> results(jobs.size());
  std::vector<std::exception_ptr> errors(jobs.size());
  std::size_t next = 0;
  std::mutex mutex;
  auto worker = [&] {
    for (;;) {
      std::size_t index;
      {
        std::lock_guard lock(mutex);
        if (next == jobs.size()) return;
        index = next++;
      }
      try {
        results[index] = jobs[index]();
      } catch (...) {
        errors[index] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, threads); ++t) pool.emplace_back(worker);
  for (auto& thread : pool) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  std::vector<Outcome> out;
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

// The iteration (the first of an optimizer step) from which the step time stays within 2% of
// `target_ns` to the end of the run
// (iteration 1 records the trace, so 2 is the earliest possible); nullopt when it never settles.
// Where lengths vary, each step is held to the best static's own step of the same number
// (`per_step`: the same seed draws the same lengths in every configuration).
std::optional<std::int64_t> settled_from_iteration(const Outcome& outcome, std::int64_t target_ns,
                                                   const std::vector<std::int64_t>* per_step = nullptr) {
  if (outcome.status != core::RunStatus::kOk) return std::nullopt;
  std::optional<std::int64_t> settled;
  for (std::size_t i = outcome.step_ns.size(); i-- > 1;) {
    const std::int64_t target = per_step && i < per_step->size() ? (*per_step)[i] : target_ns;
    if (static_cast<double>(outcome.step_ns[i]) > 1.02 * static_cast<double>(target)) break;
    settled = static_cast<std::int64_t>(i == 0 ? 1 : outcome.step_last_iteration[i - 1] + 1);
  }
  return settled;
}

std::string ms(std::int64_t ns) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", static_cast<double>(ns) / 1e6);
  return buffer;
}

std::string gib(std::int64_t bytes) {
  if (bytes == 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

std::string numel(std::int64_t n) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", static_cast<double>(n));
  return buffer;
}

int compare(const CompareOptions& options) {
  const unsigned threads = options.jobs ? options.jobs : available_cpus();
  std::ostringstream table;
  table << "| scenario | configuration | start bucket | final bucket | steady step (ms) | seed spread | "
           "vs best static | within 2% of best static from iteration | peak reserved (GiB) |\n"
        << "|---|---|---|---|---|---|---|---|---|\n";
  const std::string iterations = "training.iterations=" + std::to_string(options.iterations);
  const std::string warmup = "training.warmup_iterations=1";
  for (const auto& file : options.scenarios) {
    const core::Scenario scenario = core::load_scenario(file, {}, bundled_data());
    if (const std::string note = uncalibrated_note(scenario); !note.empty()) std::cerr << note << "\n";
    if (const std::string note = fidelity_band_note(scenario); !note.empty()) std::cerr << note << "\n";
    const bool noisy = seeds_vary(scenario.noise);
    const bool lengths_vary = scenario.training.seq_len_distribution.varies();
    const int seeds = noisy ? options.seeds : 1;
    const std::uint64_t first_seed = scenario.noise.seed;
    std::vector<std::function<Outcome()>> jobs;
    // The best static bucket: a x2 grid from 1e5 to max_live on the same seed, with the
    // scenario's other settings (the controller forced to static).
    const std::vector<std::int64_t> grid = static_bucket_grid(scenario.zero.max_live_numel);
    for (const std::int64_t b : grid) {
      jobs.push_back([=] {
        return simulate(file, {iterations, warmup, "controller={policy: static}",
                               "zero.stage3_prefetch_bucket_size=" + std::to_string(b)},
                        "static " + numel(b), first_seed, seeds);
      });
    }
    jobs.push_back([=] {
      return simulate(file, {iterations, warmup, "controller={policy: static}", "zero.stage3_prefetch_bucket_size=5e7"},
                      "DeepSpeed default (static 5e7)", first_seed, seeds);
    });
    // A policy the scenario itself configures runs with the scenario's controller section (its
    // memory budget, say); any other with that policy's defaults.
    const std::string own_policy = core::controller_policy_name(scenario.controller.policy);
    const std::int64_t budget = scenario.controller.memory_budget_bytes;
    std::vector<std::string> policy_labels;
    for (const auto& policy : options.policies) {
      std::vector<std::string> overrides{iterations, warmup};
      std::string label = policy;
      if (policy == own_policy) {
        if (budget > 0) label += " (budget " + gib(budget) + " GiB)";
      } else {
        overrides.push_back("controller={policy: " + policy + "}");
      }
      policy_labels.push_back(label);
      jobs.push_back([=] { return simulate(file, overrides, label, first_seed, seeds); });
    }
    const std::vector<Outcome> outcomes = run_all(jobs, threads);
    const auto best = std::min_element(outcomes.begin(), outcomes.begin() + static_cast<std::ptrdiff_t>(grid.size()),
                                       [](const Outcome& a, const Outcome& b) {
                                         if (a.status != b.status) return a.status == core::RunStatus::kOk;
                                         return a.steady_ns < b.steady_ns;
                                       });
    auto row = [&](const Outcome& o, const std::string& label) {
      const auto settled = settled_from_iteration(o, best->steady_ns, lengths_vary ? &best->step_ns : nullptr);
      const double ratio = static_cast<double>(o.steady_ns) / static_cast<double>(best->steady_ns);
      char vs[64];
      // A difference no larger than either row's spread over the seeds is not a difference.
      const bool within_spread = noisy && o.status == core::RunStatus::kOk && &o != &*best &&
                                 std::abs(ratio - 1.0) <= std::max(o.seed_spread, best->seed_spread);
      std::snprintf(vs, sizeof vs, "%+.1f%%%s", (ratio - 1.0) * 100.0, within_spread ? " (within seed spread)" : "");
      char spread[32];
      std::snprintf(spread, sizeof spread, "%.1f%% (%d seeds)", 100 * o.seed_spread, seeds);
      table << "| " << scenario.name << " | " << label << " | " << numel(o.bucket_numel) << " | "
            << numel(o.final_bucket_numel) << " | "
            << (o.status == core::RunStatus::kOk ? ms(o.steady_ns) : std::string(core::run_status_name(o.status)))
            << " | " << (noisy ? std::string(spread) : std::string("no noise")) << " | " << (o.status == core::RunStatus::kOk ? vs : "-") << " | "
            << (settled ? std::to_string(*settled) : std::string("never")) << " | " << gib(o.peak_reserved_bytes)
            << " |\n";
    };
    row(outcomes[grid.size()], "DeepSpeed default (static 5e7)");
    row(*best, "best static (" + best->label.substr(7) + ")");
    if (budget > 0) {
      // What a user holding the same budget could deploy without a controller.
      std::optional<std::size_t> fitting;
      for (std::size_t i = 0; i < grid.size(); ++i) {
        const Outcome& o = outcomes[i];
        if (o.status != core::RunStatus::kOk || o.peak_reserved_bytes > budget) continue;
        if (!fitting || o.steady_ns < outcomes[*fitting].steady_ns) fitting = i;
      }
      if (fitting) {
        row(outcomes[*fitting], "best static within the budget (" + outcomes[*fitting].label.substr(7) + ")");
      }
    }
    for (std::size_t p = 0; p < options.policies.size(); ++p) row(outcomes[grid.size() + 1 + p], policy_labels[p]);
  }
  if (options.output.empty()) {
    std::cout << table.str();
  } else {
    core::write_text_atomically(options.output, table.str());
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_compare_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* command = app.add_subcommand(
      "compare", "Default static, best static and adaptive policies side by side, per scenario");
  command->add_option("scenarios", options->scenarios, "scenario YAML files")->required();
  command->add_option("--policies", options->policies, "adaptive policies to compare")->delimiter(',');
  command->add_option("--iterations", options->iterations, "iterations per run")->check(CLI::Range(4, 100000));
  command->add_option("--seeds", options->seeds,
                      "noise seeds per configuration, from the scenario's own; the steady step is their median "
                      "(one seed where the scenario has no jitter: every seed would give the same run)")
      ->check(CLI::Range(1, 100));
  command->add_option("-o,--output", options->output, "write the markdown table here (default: stdout)");
  command->add_option("-j,--jobs", options->jobs, "simulations in parallel (default: the CPUs this process may use)");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return compare(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps

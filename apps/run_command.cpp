#include "run_command.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "command_context.hpp"
#include "folder_lock.hpp"
#include "stop_signals.hpp"
#include "memory_timeline_writer.hpp"
#include "parallel_runner.hpp"
#include "core/io/json_file.hpp"
#include "core/metrics/metrics_csv.hpp"
#include "core/control/prefetch_controller.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/scenario_json.hpp"
#include "core/metrics/summary_json.hpp"
#include "core/hardware/device_memory_budget.hpp"
#include "fidelity_band.hpp"
#include "sim/export/kineto_trace.hpp"
#include "sim/export/trace_json.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::apps {
namespace {

struct RunOptions {
  std::string scenario;
  std::string output_dir;
  std::vector<std::string> overrides;
  bool no_expect = false;  // --no-expect: the scenario's checks are neither run nor recorded
  std::string kineto_dir;  // --kineto-trace: also one torch.profiler-schema trace per rank here
  unsigned threads = 0;     // --threads: 0 = the CPUs this process may use
  bool every_rank = false;  // --every-rank: no collapse of identical ranks (sim/ranks/rank_symmetry.hpp)
};


std::string ms(std::int64_t ns) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buffer;
}

std::string mib(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buffer;
}

core::DeviceMemoryBudget budget_of(const core::Scenario& scenario) {
  return core::device_memory_budget(scenario.cluster.hardware, scenario.cluster.world_size(), scenario.cluster.nodes);
}

nlohmann::ordered_json device_memory_json(const core::Scenario& scenario) {
  const core::DeviceMemoryBudget b = budget_of(scenario);
  const auto mib = [](std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  nlohmann::ordered_json j;
  j["cuda_total_mib"] = mib(b.cuda_total_bytes);
  j["cuda_context_mib"] = mib(b.context_bytes);
  j["nccl_buffers_mib"] = mib(b.nccl_bytes);
  j["nccl_communicators"] = b.nccl_communicators;
  j["nccl_channels"] = b.nccl_channels;
  j["nccl_nvls"] = b.nccl_nvls;
  j["cublas_workspaces_mib"] = mib(b.cublas_workspace_bytes);
  j["allocator_capacity_mib"] = mib(b.allocator_capacity_bytes());
  return j;
}

void print_summary(const core::Scenario& scenario, const core::SummaryStats& stats,
                   const sim::WorldResult& result, const std::filesystem::path& dir,
                   const std::optional<FidelityBand>& band) {
  std::cout << scenario.name << ": " << scenario.model.name << " on " << scenario.cluster.world_size() << "x "
            << scenario.cluster.hardware.name << ", micro_batch " << scenario.training.micro_batch << ", seq_len "
            << scenario.training.seq_len_distribution.text() << ", prefetch bucket " << scenario.zero.prefetch_bucket_numel << "\n";
  for (const auto& note : scenario.notes) std::cout << "note: " << note << "\n";
  if (const std::string note = uncalibrated_note(scenario); !note.empty()) std::cout << note << "\n";
  if (band) std::cout << "note: " << scenario.name << ": " << band->text() << "\n";
  std::cout << "status:              " << core::run_status_name(result.status);
  if (!result.message.empty()) std::cout << " (" << result.message << ")";
  std::cout << "\niterations:          " << stats.iterations << " (" << stats.steady_iterations
            << " steady" << (stats.steady_from_all_iterations ? ", no warm-up excluded" : "") << ")\n"
            << "steady step time:    " << ms(stats.steady_step_time_ns);
  if (stats.facts.grad_accum > 1) {
    // Per optimizer step (global batch); say what it is made of.
    std::cout << " per optimizer step of " << stats.facts.grad_accum << " micro-batches ("
              << (stats.step_time_from_micro_batches
                      ? std::string("no complete step in the run: ") + std::to_string(stats.facts.grad_accum) +
                            " x the micro-batch median, optimizer left out"
                      : std::to_string(stats.steady_optimizer_steps) + " steady steps")
              << "; micro-batch " << (stats.steady_is_mean_over_lengths ? "mean " : "median ")
              << ms(stats.steady_micro_batch_time_ns) << ")";
  }
  // A median of a mix of lengths would be one length's time: the mean counts every iteration.
  if (stats.steady_is_mean_over_lengths) std::cout << " (mean over the steady steps: lengths vary)";
  std::cout << "\n";
  std::printf("samples/s:           %.2f\n", stats.samples_per_second);
  std::printf("tokens/s:            %.0f\n", stats.tokens_per_second);
  std::printf("TFLOPS/GPU:          %.1f\n", stats.tflops_per_gpu);
  std::cout << "exposed comm:        " << ms(stats.mean_exposed_comm_ns) << " per iteration\n"
            << "stall forward:       " << ms(stats.mean_forward_stall_ns) << " per iteration\n"
            << "stall backward:      " << ms(stats.mean_backward_stall_ns) << " per iteration\n"
            << "peak gathered params: " << mib(stats.peak_gathered_param_bytes) << "\n"
            << "peak allocated:      " << mib(stats.peak_allocated_bytes) << "\n"
            << "peak reserved:       " << mib(stats.peak_reserved_bytes) << " ("
            << (stats.peak_reserved_bytes > 0
                    ? std::to_string(100 * (stats.peak_reserved_bytes - stats.peak_allocated_bytes) /
                                     stats.peak_reserved_bytes)
                    : std::string("0"))
            << "% not allocated at the peaks: fragmentation and cache)\n"
            << "device memory:       " << budget_of(scenario).text() << "\n"
            << (stats.trace_invalidations
                    ? "trace invalidations: " + std::to_string(stats.trace_invalidations->total) + " (" +
                          std::to_string(stats.trace_invalidations->per_iteration).substr(0, 4) +
                          " per steady iteration; cost: " + ms(stats.trace_invalidations->mean_cost_ns) +
                          " per iteration of compute idle on fetches the lost trace left unprefetched)\n"
                    : std::string())
            << "alloc retries:       " << stats.num_alloc_retries
            << " (num_alloc_retries: mallocs that freed the allocator's cache and retried, most on one rank)\n"
            << "events simulated:    " << result.events_processed << "\n"
            << "ranks simulated:     " << result.ranks.text()
            << (result.ranks.collapsed()        ? " (identical ranks: one simulated for all)"
                : result.ranks.world_size == 1 ? ""
                                                : " (every rank: " + result.ranks.full_because + ")")
            << "\n"
            << "outputs in:          " << dir.string() << "\n";
  if (stats.peak_memory) {
    const core::PeakMemoryBreakdown& p = *stats.peak_memory;
    std::cout << "at the peak (rank " << p.rank << ", " << mib(p.reserved_bytes) << " reserved): model states "
              << mib(p.model_states_bytes) << ", activations " << mib(p.activation_bytes) << ", gathered parameters "
              << mib(p.gathered_param_bytes) << ", gradients " << mib(p.gradient_bytes) << ", allocator cache "
              << mib(p.cache_bytes()) << "\n";
  }
}

// DeepSpeed warns once per step when the allocator flushed its cache under memory pressure
// (deepspeed/runtime/zero/stage3.py, "pytorch allocator cache flushes since last step"); the
// simulator says so once, at the end of the run, where status alone reads "ok".
void warn_about_cache_flushes(const core::SummaryStats& stats) {
  if (stats.num_alloc_retries == 0) return;
  std::cerr << "warning: the caching allocator freed its cache and retried " << stats.num_alloc_retries
            << " time(s) on one rank (torch.cuda.memory_stats() num_alloc_retries): memory pressure, which "
               "synchronises the device and costs time on real hardware. DeepSpeed warns of it as \"pytorch "
               "allocator cache flushes since last step\"; lower stage3_max_live_parameters, the prefetch "
               "bucket or the micro batch to make room\n";
}

// What trace.json, samples.csv and memory.csv left out (output.trace_ranks, trace_iterations and
// the default limits above 64 ranks), one line per file; nothing when they hold everything.
std::vector<std::string> timelines_left_out(const core::Scenario& scenario, std::int32_t trace_over_budget,
                                            std::int32_t memory_over_budget) {
  const core::OutputConfig& output = scenario.output;
  const std::int64_t world_size = scenario.cluster.world_size();
  const std::int64_t iterations = scenario.training.iterations;
  const std::string why = output.timelines_limited_by_default
                              ? " (the default above " + std::to_string(core::kLimitTimelinesAboveRanks) +
                                    " ranks; output.trace_ranks and output.trace_iterations choose)"
                              : "";
  const std::string ranks = output.trace_ranks.all() ? ""
                                                     : "ranks " + core::describe_indices(output.trace_ranks.indices) +
                                                           " of " + std::to_string(world_size) + " kept";
  const std::int64_t budget = output.timeline_budget_bytes;
  const std::string budget_text = budget >= 1'000'000 ? std::to_string(budget / 1'000'000) + " MB"
                                  : budget >= 1'000   ? std::to_string(budget / 1'000) + " kB"
                                                      : std::to_string(budget) + " bytes";
  auto over_budget = [&](std::int32_t first) {
    const std::string which = first >= iterations ? "iteration " + std::to_string(first)
                                                   : "iterations " + std::to_string(first) + "-" + std::to_string(iterations);
    return which + " left out to stay under " +
           budget_text + " (output.timeline_budget)";
  };
  std::vector<std::string> lines;
  auto add = [&](const std::string& file, std::vector<std::string> parts) {
    std::string text;
    for (const auto& part : parts) {
      if (!part.empty()) text += (text.empty() ? "" : "; ") + part;
    }
    if (!text.empty()) lines.push_back(file + ": " + text + why);
  };
  if (output.trace) {
    const std::string kept_iterations =
        output.trace_iterations.all()
            ? ""
            : "iterations " + core::describe_indices(output.trace_iterations.indices) + " of " +
                  std::to_string(iterations) + " kept";
    add("trace.json", {ranks, kept_iterations, trace_over_budget > 0 ? over_budget(trace_over_budget) : ""});
  }
  add("samples.csv", {ranks});
  if (output.memory_timeline) {
    add("memory.csv", {ranks, memory_over_budget > 0 ? over_budget(memory_over_budget) : ""});
  }
  return lines;
}

int run(const RunOptions& options) {
  core::Scenario scenario = core::load_scenario(options.scenario, options.overrides, bundled_data());
  const std::filesystem::path dir =
      options.output_dir.empty() ? scenario.output.dir : std::filesystem::path(options.output_dir);
  std::filesystem::create_directories(dir);
  const FolderLock lock(dir);  // two runs into one folder would interleave its rows
  // --kineto-trace writes a folder of its own: held as well, unless it is the output folder.
  std::optional<FolderLock> kineto_lock;
  if (!options.kineto_dir.empty()) {
    std::filesystem::create_directories(options.kineto_dir);
    if (!std::filesystem::equivalent(options.kineto_dir, dir)) kineto_lock.emplace(options.kineto_dir);
  }
  // Until this run's own summary replaces it, the folder says a run is under way: an old "ok"
  // summary never sits beside a run's partial rows (a kill -9, a full disk).
  core::write_json_atomically(dir / "summary.json", core::running_summary_json(core::scenario_to_json(scenario)));

  // Row files are appended and flushed as each iteration finishes.
  core::IterationsCsv iterations_csv(dir / "iterations.csv", scenario.training.seq_len_distribution.varies());
  core::SamplesCsv samples_csv(dir / "samples.csv",
                               {core::kHostWaitColumn, core::kHostIntervalColumn, core::kPeakReservedColumn});
  core::BucketsCsv buckets_csv(dir / "buckets.csv");
  std::optional<MemoryTimelineWriter> memory_csv;
  if (scenario.output.memory_timeline) memory_csv.emplace(dir / "memory.csv", scenario.output.timeline_budget_bytes);
  sim::IterationSink sink;
  sink.on_iteration = [&](const core::IterationRecord& record, std::span<const core::TimingSample> samples,
                          std::span<const core::BucketRecord> buckets) {
    samples_csv.append(samples);
    buckets_csv.append(buckets);
    iterations_csv.append(record);
    if (memory_csv) memory_csv->end_iteration(record.iteration);
  };
  sink.on_memory = [&](std::span<const core::MemoryPoint> points) {
    if (memory_csv) memory_csv->add(points);
  };
  if (!scenario.output.trace_ranks.all()) {
    sink.sample_rank_mask = scenario.output.trace_ranks.mask(scenario.cluster.world_size());
  }

  // --kineto-trace writes a file per rank of the job, so it simulates every one.
  const sim::RankSimulation rank_simulation = options.every_rank || !options.kineto_dir.empty()
                                                  ? sim::RankSimulation::kEveryRank
                                                  : sim::RankSimulation::kCollapseIdentical;
  sim::World world(scenario, scenario.output.trace || !options.kineto_dir.empty(), rank_simulation);
  if (!options.kineto_dir.empty()) world.record_deepspeed_frames();  // python_function events
  world.set_threads(static_cast<int>(thread_count(options.threads, static_cast<std::size_t>(world.ranks()))));
  sim::WorldResult result;
  {
    const StopSignals stop;  // Ctrl-C, scancel's SIGTERM, SIGHUP: stop and keep what finished
    result = world.run(sink, StopSignals::flag());
  }
  if (memory_csv) memory_csv->finish();

  const core::SummaryStats stats =
      core::summarize(result.metrics, static_cast<int>(scenario.training.warmup_iterations));
  nlohmann::ordered_json summary =
      core::summary_to_json(stats, result.status, core::scenario_to_json(scenario), result.message);
  // A bundled scenario's `expect:` describes the file as written; exploring it with --set
  // usually breaks them, hence --no-expect.
  const nlohmann::ordered_json checks = options.no_expect
                                            ? nlohmann::ordered_json::array()
                                            : core::check_expectations(scenario.expect, result.status, stats);
  summary["expectations"] = checks;
  summary["uncalibrated"] = scenario.cluster.calibration.uncalibrated;
  // How far the fidelity corpus's nearest cases were off (out of sample): how far to trust this.
  const std::optional<FidelityBand> band = bundled_fidelity_band(scenario);
  if (band) summary["fidelity_band"] = band->to_json();
  summary["device_memory"] = device_memory_json(scenario);
  summary["ranks_simulated"] = result.ranks.text();
  if (!result.ranks.full_because.empty()) summary["every_rank_simulated_because"] = result.ranks.full_because;
  // A scenario's `expect:` is a regression test: any check not met fails the run with exit
  // code 5 (summary.json says which and records that exit code). An interrupted run stays 130:
  // it did not finish, so its checks say nothing.
  const bool all_met = std::all_of(checks.begin(), checks.end(),
                                   [](const nlohmann::ordered_json& check) { return check["met"].get<bool>(); });
  const int exit_code = all_met || result.status == core::RunStatus::kInterrupted
                            ? core::run_status_exit_code(result.status)
                            : kExitExpectationFailed;
  summary["exit_code"] = exit_code;
  const std::vector<std::string> left_out =
      timelines_left_out(scenario, world.trace().first_iteration_over_budget(),
                         memory_csv ? memory_csv->first_iteration_over_budget() : 0);
  if (!left_out.empty()) summary["timelines_left_out"] = left_out;
  core::write_json_atomically(dir / "summary.json", summary);
  if (scenario.output.trace) sim::write_trace_json(dir / "trace.json", world);
  if (!options.kineto_dir.empty()) sim::write_kineto_traces(options.kineto_dir, world);
  print_summary(scenario, stats, result, dir, band);
  warn_about_cache_flushes(stats);
  for (const std::string& line : left_out) std::cerr << "note: " << line << "\n";
  for (const auto& check : checks) {
    std::cout << "expect " << check["check"].get<std::string>() << ": " << check["expected"].dump() << ", got "
              << check["actual"].dump() << (check["met"].get<bool>() ? " (met)" : " (NOT MET)") << "\n";
  }
  return exit_code;
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Simulate a scenario and write summary, CSVs and trace");
  command->add_option("scenario", options->scenario, "scenario YAML")->required();
  command->add_option("-o,--output", options->output_dir, "output folder (default: the scenario's output.dir)");
  command->add_option("--set", options->overrides, "override a scenario key: key.path=value");
  command->add_option("--kineto-trace", options->kineto_dir,
                      "also write the run as torch.profiler would have recorded it, DeepSpeed's Python frames "
                      "included (with_stack=True): DIR/rank<N>.pt.trace.json (for trace-summary and calibrate "
                      "--from-trace; docs/traces.md)");
  command->add_flag("--every-rank", options->every_rank,
                    "simulate every rank even where the scenario makes them identical (by default one stands for "
                    "all: the same figures, but samples.csv, memory.csv and trace.json then hold that one)");
  command->add_option("--threads", options->threads,
                      "threads for ranks that are simulated apart (every rank differs, e.g. with noise; default: the "
                      "CPUs this process may use, sched_getaffinity). The outputs are the same for any count; "
                      "--kineto-trace runs on one")
      ->check(CLI::Range(0u, 4096u));
  command->add_flag("--no-expect", options->no_expect,
                    "do not check the scenario's expect: section (a check not met is exit code 5)");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return run(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps

#include "validate_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_context.hpp"
#include "folder_lock.hpp"
#include "process_job.hpp"
#include "metric_text.hpp"
#include "real_kineto_trace.hpp"
#include "real_trace.hpp"
#include "trace_validation.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/input/input_error.hpp"
#include "core/metrics/metrics.hpp"
#include "core/metrics/metrics_csv.hpp"
#include "core/metrics/rank_imbalance.hpp"
#include "core/scenario/scenario.hpp"
#include "core/zero/trace_mode.hpp"
#include "gpu_backend/device_backend.hpp"
#include "gpu_backend/executor/executor.hpp"
#include "sim/export/trace_json.hpp"
#include "sim/trace/trace_recorder.hpp"
#include "sim/ranks/world.hpp"

namespace prefetchlab::apps {
namespace {

struct ValidateOptions {
  std::string scenario;
  std::string backend;
  std::vector<std::string> traces;  // --against-trace: a real run's torch.profiler traces instead
  core::TimelineOptions timeline;
  std::string hardware;
  std::string output_dir;
  int repeats = 3;
  std::vector<std::string> overrides;
  LauncherOptions launcher;
};

// One compared metric: its steady value from a run's summary and per iteration.
struct MetricDef {
  const char* name;     // validate.csv column stem (units in the name)
  const char* label;
  bool relative_to_step;  // error as a fraction of the real step time (stalls may be ~0)
  std::int64_t (*summary)(const core::SummaryStats&);
  std::int64_t (*per_iteration)(const core::IterationRecord&);
};

const MetricDef kMetrics[] = {
    {"step_time_ns", "steady step time", false, [](const core::SummaryStats& s) { return s.steady_step_time_ns; },
     [](const core::IterationRecord& r) { return r.step_time_ns; }},
    {"forward_stall_ns", "forward stall", true, [](const core::SummaryStats& s) { return s.mean_forward_stall_ns; },
     [](const core::IterationRecord& r) { return r.forward_stall_ns; }},
    {"backward_stall_ns", "backward stall", true, [](const core::SummaryStats& s) { return s.mean_backward_stall_ns; },
     [](const core::IterationRecord& r) { return r.backward_stall_ns; }},
    {"peak_allocated_bytes", "peak allocated", false, [](const core::SummaryStats& s) { return s.peak_allocated_bytes; },
     [](const core::IterationRecord& r) { return r.peak_allocated_bytes; }},
    {"peak_reserved_bytes", "peak reserved", false, [](const core::SummaryStats& s) { return s.peak_reserved_bytes; },
     [](const core::IterationRecord& r) { return r.peak_reserved_bytes; }},
    // The bucket trajectory: its steady mean here, every iteration in validate.csv.
    {"bucket_numel", "bucket (mean)", false,
     [](const core::SummaryStats& s) {
       const auto& t = s.bucket_trajectory_numel;
       const auto from = static_cast<std::size_t>(std::min<int>(s.iterations - s.steady_iterations, static_cast<int>(t.size())));
       double sum = 0;
       for (std::size_t i = from; i < t.size(); ++i) sum += static_cast<double>(t[i]);
       return t.size() > from ? static_cast<std::int64_t>(sum / static_cast<double>(t.size() - from)) : std::int64_t{0};
     },
     [](const core::IterationRecord& r) { return r.bucket_numel; }},
};

std::string shown(const MetricDef& m, double v) { return metric_text(m.name, v); }

std::string percent(double fraction) { return percent_text(fraction); }

// The real run's per-iteration rows: samples.csv, buckets.csv, iterations.csv in `dir`.
void write_real_rows(const std::filesystem::path& dir, const gpu::ExecutorResult& real) {
  core::SamplesCsv samples(dir / "samples.csv", {core::kHostWaitColumn, core::kHostIntervalColumn, core::kPeakReservedColumn});
  samples.append(real.metrics.samples);
  core::BucketsCsv buckets(dir / "buckets.csv");
  buckets.append(real.metrics.buckets);
  core::IterationsCsv iterations(dir / "iterations.csv");
  for (const auto& record : real.metrics.iterations) iterations.append(record);
}

int validate(const ValidateOptions& o) {
  if (o.backend.empty() == o.traces.empty()) {
    throw core::InputError({"<command line>", 0}, "--backend, --against-trace",
                           o.backend.empty() ? "neither is given" : "both are given",
                           "--backend host|cuda (run it here) or --against-trace TRACE... (a run already recorded)");
  }
  if (!o.traces.empty()) {
    if (o.launcher.any_given()) {
      throw core::InputError({"<command line>", 0}, "--launcher", "is given with --against-trace (a run already recorded)",
                             "--backend host|cuda to run the ranks, or leave it out");
    }
    TraceValidationOptions t;
    t.scenario = o.scenario;
    t.traces = o.traces;
    t.hardware = o.hardware;
    t.output_dir = o.output_dir;
    t.overrides = o.overrides;
    t.timeline = o.timeline;
    return run_trace_validation(t);
  }
  const auto backend = gpu::parse_backend(o.backend);
  if (!backend) throw core::InputError({"<command line>", 0}, "--backend", "is '" + o.backend + "'", "host or cuda");
  std::vector<std::string> overrides = o.overrides;
  if (!o.hardware.empty()) {
    // A file named on the command line is relative to the working directory (inside a scenario
    // the same key is relative to the scenario's folder); bundled names pass through.
    const std::filesystem::path given(o.hardware);
    const bool is_file = std::filesystem::exists(given);
    overrides.push_back("cluster.hardware=" + (is_file ? std::filesystem::absolute(given).string() : o.hardware));
  }
  const core::Scenario scenario = core::load_scenario(o.scenario, overrides, bundled_data());
  // Said before any device starts (the executor refuses it too, gpu_backend/executor/rank_executor.cpp).
  if (scenario.training.seq_len_distribution.varies()) {
    throw core::InputError({o.scenario, 0}, "training.seq_len",
                           "is a distribution of lengths (" + scenario.training.seq_len_distribution.text() +
                               "), which is simulated only; the real backend runs one length",
                           "a fixed seq_len (or {packed: N}) for validate --backend");
  }
  // --launcher env: this process is one rank; rank 0 gathers every rank's records and writes
  // the report, the others only run.
  std::vector<std::string> identity{"--backend=" + o.backend, "--repeats=" + std::to_string(o.repeats), "--hardware=" + o.hardware};
  for (const auto& s : o.overrides) identity.push_back("--set=" + s);
  const std::unique_ptr<gpu::ProcessLink> link = join_process_job(o.launcher, o.backend, "validate", o.scenario, identity);
  if (link && link->world_size() != scenario.cluster.world_size()) {
    throw core::InputError({o.scenario, 0}, "cluster", "has " + std::to_string(scenario.cluster.world_size()) + " ranks but the launcher started " +
                               std::to_string(link->world_size()) + " (" + link->launch().launcher + ")",
                           "as many processes as the scenario's ranks (nodes x gpus_per_node)");
  }
  const bool writes_report = !link || link->rank() == 0;
  const std::filesystem::path dir = o.output_dir.empty() ? scenario.output.dir / "validate" : std::filesystem::path(o.output_dir);
  if (writes_report) std::filesystem::create_directories(dir);
  std::optional<FolderLock> lock;  // rank 0 (or the one process) writes the folder
  if (writes_report) lock.emplace(dir);
  const int warmup = static_cast<int>(scenario.training.warmup_iterations);

  // Real side: `repeats` independent runs (a fresh device group each), so the spread of the
  // measurement itself is known.
  gpu::DeviceGroupOptions group_options;
  group_options.world_size = static_cast<int>(scenario.cluster.world_size());
  group_options.capacity_bytes = static_cast<std::uint64_t>(scenario.cluster.hardware.gpu.memory_bytes);
  group_options.allocator = scenario.memory.allocator;
  std::vector<gpu::ExecutorResult> runs;
  std::vector<core::SummaryStats> real_stats;
  std::int64_t workspace_bytes = 0;  // the executor's harness buffers (gpu::ExecutorGeometry)
  int failed_exit_code = kExitOk;    // a repeat that failed after others finished
  for (int rep = 0; rep < o.repeats; ++rep) {
    const std::unique_ptr<gpu::DeviceGroup> group = make_command_device_group(*backend, group_options, o.launcher, link.get());
    std::optional<gpu::Executor> executor;
    try {
      executor.emplace(scenario, *group);
    } catch (const std::invalid_argument& e) {
      throw core::InputError({o.scenario, 0}, "", e.what(), "a scenario the real backend runs (offload to cpu, not nvme)");
    }
    workspace_bytes = executor->geometry().workspace_bytes;
    gpu::ExecutorResult result = executor->run();
    if (result.status != core::RunStatus::kOk) {
      std::cerr << "error: " << (link ? "rank " + std::to_string(link->rank()) + ": " : std::string()) << "the " << o.backend
                << " run " << rep + 1 << " of " << scenario.name << " ended " << core::run_status_name(result.status)
                << ": " << result.message << "\n";
      failed_exit_code = core::run_status_exit_code(result.status);
      // The runs already done stand: the report rests on them.
      if (!runs.empty()) {
        if (writes_report) {
          std::cerr << "the report below rests on the " << runs.size() << " run(s) that finished before it\n";
        }
        break;
      }
      // None did: the iterations the ranks finished keep their rows, as a failed simulated run's do
      // (those of the ranks that reported, when a rank's process died with its records).
      if (result.has_records && !result.metrics.iterations.empty()) {
        write_real_rows(dir, result);
        std::cerr << "the " << result.metrics.iterations.size() << " finished iteration(s) are in "
                  << (dir / "iterations.csv").string() << ", samples.csv and buckets.csv";
        if (!result.ranks_without_records.empty()) {
          std::cerr << " (without rank(s)";
          for (const int r : result.ranks_without_records) std::cerr << " " << r;
          std::cerr << ", whose records died with their process)";
        }
        std::cerr << "\n";
      }
      return failed_exit_code;
    }
    runs.push_back(std::move(result));
    if (runs.back().has_records) real_stats.push_back(core::summarize(runs.back().metrics, warmup));
    if (o.repeats > 1) std::cerr << "validate: run " << rep + 1 << " of " << o.repeats << " done\n";
  }
  if (!writes_report) {
    std::cout << "rank " << link->rank() << " of " << link->world_size() << ": " << runs.size()
              << " run(s) done; rank 0 writes the report\n";
    return failed_exit_code;
  }
  // The run whose steady step time is the median stands for the real side per iteration.
  std::vector<std::size_t> order(runs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return real_stats[a].steady_step_time_ns < real_stats[b].steady_step_time_ns;
  });
  const gpu::ExecutorResult& real = runs[order[order.size() / 2]];

  sim::World world(scenario, /*record_trace=*/true);
  const sim::WorldResult simulated = world.run();
  if (simulated.status != core::RunStatus::kOk) {
    std::cerr << "error: the simulation of " << scenario.name << " ended " << core::run_status_name(simulated.status)
              << ": " << simulated.message << "\n";
    return core::run_status_exit_code(simulated.status);
  }
  const core::SummaryStats sim_stats = core::summarize(simulated.metrics, warmup);

  write_real_rows(dir, real);
  // Both timelines, to open side by side (same tracks where they correspond).
  write_real_trace_json(dir / "real_trace.json", scenario, real);
  // The same run in the torch.profiler schema: calibrate --from-trace and validate
  // --against-trace read it like a user's trace.
  write_real_kineto_traces(dir / "real_kineto", scenario, real);
  sim::write_trace_json(dir / "simulated_trace.json", world);
  {
    std::vector<std::string> header{"iteration", "trace_mode"};
    for (const auto& m : kMetrics) {
      header.push_back(std::string("real_") + m.name);
      header.push_back(std::string("simulated_") + m.name);
    }
    core::CsvRowWriter csv(dir / "validate.csv", header);
    const std::size_t n = std::min(real.metrics.iterations.size(), simulated.metrics.iterations.size());
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = real.metrics.iterations[i];
      const auto& s = simulated.metrics.iterations[i];
      std::vector<core::CsvField> row{r.iteration, core::trace_mode_name(r.trace_mode)};
      for (const auto& m : kMetrics) {
        row.emplace_back(m.per_iteration(r));
        row.emplace_back(m.per_iteration(s));
      }
      csv.append(row);
    }
  }

  std::cout << scenario.name << ": " << o.backend << " device vs simulator (" << scenario.cluster.hardware.name << "), "
            << scenario.cluster.world_size() << " rank(s), " << runs.size() << " real run(s) of "
            << real.metrics.iterations.size() << " iterations (" << real_stats.front().steady_iterations << " steady)\n"
            << "real = median of the runs; spread = (max - min) / median over the runs; error = (simulated - real) / "
               "real, stalls relative to the real step time\n";
  std::printf("%-18s %14s %14s %9s %9s\n", "metric", "real", "simulated", "error", "spread");
  const double real_step = core::median([&] {
    std::vector<double> v;
    for (const auto& s : real_stats) v.push_back(static_cast<double>(s.steady_step_time_ns));
    return v;
  }());
  core::CsvRowWriter summary(dir / "validate_summary.csv",
                             {"metric", "real", "simulated", "error", "error_basis", "real_spread", "real_runs"});
  for (const auto& m : kMetrics) {
    std::vector<double> values;
    for (const auto& s : real_stats) values.push_back(static_cast<double>(m.summary(s)));
    const double r = core::median(values);
    const double sv = static_cast<double>(m.summary(sim_stats));
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    const double basis = m.relative_to_step ? real_step : r;
    // A zero basis (nothing measured) would make every error infinite: say so instead.
    const double error = basis > 0 ? (sv - r) / basis : (sv == r ? 0.0 : std::nan(""));
    const double spread = r > 0 ? (*hi - *lo) / r : (*hi == *lo ? 0.0 : std::nan(""));
    std::printf("%-18s %14s %14s %9s %9s\n", m.label, shown(m, r).c_str(), shown(m, sv).c_str(),
                (percent(error) + (m.relative_to_step ? "*" : "")).c_str(), std::isnan(spread) ? "n/a" : percent(spread).c_str() + 1);
    summary.append({m.name, r, sv, error, m.relative_to_step ? "real_step_time" : "real", spread,
                    static_cast<std::int64_t>(runs.size())});
  }
  bool same_trajectory = real_stats[0].bucket_trajectory_numel == sim_stats.bucket_trajectory_numel;
  std::printf("(* of the real step time)\nreal memory includes %.2f MiB per rank of the executor's own workspaces "
              "(input data, upstream gradient, two kernel outputs), which the simulator does not model\n",
              static_cast<double>(workspace_bytes) / (1 << 20));
  if (scenario.cluster.world_size() > 1) {
    // Compute per rank and iteration on each side: the real run's compute-stream spans, the
    // simulation's compute-stream kernels.
    std::vector<core::RankIterationCompute> real_compute, simulated_compute;
    for (const auto& span : real.timeline) {
      using Kind = gpu::TimelineSpan::Kind;
      if (span.kind == Kind::kForward || span.kind == Kind::kBackward || span.kind == Kind::kOptimizer) {
        real_compute.push_back({span.rank, span.iteration, span.end_ns - span.start_ns});
      }
    }
    world.trace().for_each_span([&](const sim::TraceSpan& span) {
      if (span.track == sim::Track::kCompute && span.kind == sim::SpanKind::kKernel) {
        simulated_compute.push_back({span.rank, span.iteration, span.duration_ns});
      }
    });
    const int ranks = static_cast<int>(scenario.cluster.world_size());
    std::printf("rank imbalance (busiest rank's compute over the ranks' mean, median of the steady iterations): "
                "real %s, simulated %s; collectives wait for the busiest rank, so identical simulated ranks "
                "(no noise:) predict the mean rank's step\n",
                percent(core::median_rank_imbalance(real_compute, ranks, warmup)).c_str(),
                percent(core::median_rank_imbalance(simulated_compute, ranks, warmup)).c_str());
  }
  std::cout << "bucket trajectory: "
            << (same_trajectory ? "identical to the simulator's" : "differs from the simulator's") << "\n"
            << "outputs in: " << dir.string() << " (validate.csv, validate_summary.csv, the real run's samples.csv, "
               "buckets.csv, iterations.csv, both timelines: real_trace.json, simulated_trace.json, and the real run "
               "in the torch.profiler schema: real_kineto/)\n";
  // A repeat that failed after others finished: the report stands on those, the exit says so.
  return failed_exit_code;
}

}  // namespace

CLI::App* add_validate_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* c = app.add_subcommand(
      "validate", "Run a scenario on a real device (or read a real run's traces) and in the simulator; report per-metric error");
  c->add_option("scenario", o->scenario, "scenario YAML")->required();
  c->add_option("--backend", o->backend, "host (threads; runs anywhere) or cuda (GPUs with NCCL)");
  c->add_option("--against-trace", o->traces,
                "instead of --backend: a real run's torch.profiler traces, one per rank (docs/traces.md)");
  c->add_flag("--whole-file-step", o->timeline.whole_file_step,
              "with --against-trace: a file without ProfilerStep#N markers is one step");
  c->add_option("--step-marker", o->timeline.step_marker,
                "with --against-trace: without ProfilerStep#N, steps run from one event of this name to the next");
  c->add_option("--hardware", o->hardware, "hardware profile for the simulator (e.g. from calibrate --backend)");
  c->add_option("-o,--output", o->output_dir, "output folder (default: <scenario output.dir>/validate)");
  c->add_option("--repeats", o->repeats, "real runs, for the measurement's spread (default 3)")->check(CLI::Range(1, 100));
  c->add_option("--set", o->overrides, "override a scenario key: key.path=value");
  add_launcher_options(c, o->launcher);
  c->callback([o, exit_code] { *exit_code = run_guarded([&] { return validate(*o); }); });
  return c;
}

}  // namespace prefetchlab::apps

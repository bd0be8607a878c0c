#include "sweep_command.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "command_context.hpp"
#include "core/io/csv_reader.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/scenario/scenario.hpp"
#include "apps/search/shard_spec.hpp"
#include "apps/search/sweep_grid.hpp"
#include "apps/search/sweep_manifest.hpp"
#include "apps/search/sweep_results.hpp"
#include "core/input/yaml_section.hpp"
#include "folder_lock.hpp"
#include "stop_signals.hpp"
#include "parallel_runner.hpp"
#include "quiet_run.hpp"
#include "sweep_progress.hpp"
#include "core/scenario/index_ranges.hpp"
#include "apps/slurm/sbatch_scripts.hpp"
#include "apps/slurm/slurm_array_env.hpp"
#include "apps/slurm/slurm_commands.hpp"
#include "apps/slurm/slurm_sweep_plan.hpp"
#include "core/io/csv_row_writer.hpp"

#include <cstdlib>

namespace prefetchlab::apps {
namespace {

namespace fs = std::filesystem;

constexpr const char* kResultsFile = "results.csv";
constexpr const char* kTimingsFile = "timings.csv";
constexpr const char* kManifestFile = "sweep.json";
const std::vector<std::string> kTimingsHeader{"point", "session", "wall_s"};

struct SweepOptions {
  std::string scenario;
  std::string grid;
  std::string output_dir;
  unsigned jobs = 0;
  bool resume = false;
  std::string shard;
  bool yes = false;  // --yes: run a grid above kMaxPointsWithoutYes
  // --slurm: write (and with --submit, submit) a Slurm array of --shards tasks and its merge.
  bool slurm = false;
  std::size_t shards = 0;  // 0: the plan's on --resume, else min(points, kDefaultSlurmShards)
  std::vector<std::string> slurm_options;
  bool submit = false;
};

constexpr std::size_t kDefaultSlurmShards = 8;

// Above this many points a sweep asks for --yes before it starts. Every point is loaded and
// checked before the first runs (about 1 ms each for a small model on one core), and a point of
// even the smallest bundled scenario takes tens of ms to simulate, so 1e6 points is hours of
// work: a grid this large is more likely a misplaced list than an intended sweep.
constexpr std::size_t kMaxPointsWithoutYes = 1'000'000;

// Checking this many points takes long enough (seconds) to say what is happening first.
constexpr std::size_t kPointsWorthACheckingLine = 10'000;

// "5 x 2 x 6" for the sizes of a grid's axes.
std::string axis_sizes(const core::SweepGrid& grid) {
  std::string text;
  for (const auto& axis : grid.axes()) text += (text.empty() ? "" : " x ") + std::to_string(axis.size());
  return text;
}


// A point's scenario: the base file with the point's values as `--set` overrides, without
// per-run outputs (a sweep writes rows only). Errors are reported at the grid's line.
core::Scenario load_point(const SweepOptions& options, const core::SweepGrid& grid, std::size_t point,
                          const core::BundledData& bundled) {
  try {
    core::Scenario scenario = core::load_scenario(options.scenario, grid.overrides_at(point), bundled);
    scenario.output.trace = false;
    scenario.output.memory_timeline = false;
    return scenario;
  } catch (const core::InputError& error) {
    throw grid.relocate(error, point);
  }
}

// Scenarios kept from validation for the run, so a point is loaded once. Bounded in count and
// in model modules (~0.45 KB each: ~100 KB per BERT-base scenario, ~0.5 MB per 70B Llama), so a
// huge grid does not hold every scenario at once; points beyond the bounds are loaded again.
constexpr std::size_t kMaxKeptScenarios = 4096;
constexpr std::size_t kMaxKeptModules = 300'000;

// Every point must load before any runs: a typo in the last value must not cost the first
// hour of a sweep. Returns scenarios of `shard` within the bounds above, indexed by
// point / shard.count (the rest empty; which ones are kept does not change any result).
std::vector<std::optional<core::Scenario>> validate_points(const SweepOptions& options, const core::SweepGrid& grid,
                                                           const core::ShardSpec& shard,
                                                           const core::BundledData& bundled) {
  std::vector<std::optional<core::Scenario>> kept(
      std::min(kMaxKeptScenarios, (grid.point_count() + shard.count - 1 - shard.index) / shard.count));
  std::atomic<std::size_t> kept_modules{0};
  std::atomic<bool> stop{false};
  parallel_for(grid.point_count(), thread_count(options.jobs, grid.point_count()), stop, [&](std::size_t point) {
    core::Scenario scenario = load_point(options, grid, point, bundled);
    if (!shard.contains(point) || point / shard.count >= kept.size()) return;
    const std::size_t modules = scenario.model.modules.size();
    if (kept_modules.fetch_add(modules) + modules <= kMaxKeptModules) kept[point / shard.count] = std::move(scenario);
  });
  return kept;
}

// What one simulation produced, as its results.csv row.
std::vector<core::CsvField> simulate_point(const core::Scenario& scenario, const core::SweepGrid& grid,
                                           std::size_t point, bool* interrupted) {
  const QuietRunResult result = run_quietly(scenario, StopSignals::flag());
  *interrupted = result.status == core::RunStatus::kInterrupted;
  return core::sweep_result_row(point, grid.values_at(point), result.status, result.stats);
}

struct FolderState {
  std::unique_ptr<FolderLock> lock;  // held for the whole session
  core::SweepManifest manifest;  // with this session counted
  std::map<std::size_t, std::string> done;  // point -> row text, from earlier sessions
};

// Checks the output folder against this sweep and prepares it: a fresh folder gets sweep.json;
// --resume checks that the folder holds this same sweep and cleans torn rows.
FolderState prepare_folder(const SweepOptions& options, const core::SweepGrid& grid, const core::ShardSpec& shard) {
  const fs::path dir(options.output_dir);
  const fs::path manifest_path = dir / kManifestFile;
  const fs::path results_path = dir / kResultsFile;
  const fs::path timings_path = dir / kTimingsFile;
  FolderState state;
  core::SweepManifest& manifest = state.manifest;
  manifest.scenario = options.scenario;
  manifest.scenario_digest = core::file_digest(options.scenario);
  manifest.grid = options.grid;
  manifest.grid_axes = grid.identity();
  manifest.points = grid.point_count();
  manifest.shard = shard;

  fs::create_directories(dir);
  state.lock = std::make_unique<FolderLock>(dir);
  const bool has_manifest = fs::exists(manifest_path);
  if (!options.resume && (has_manifest || fs::exists(results_path))) {
    throw core::InputError({dir.string(), 0}, "", "already holds a sweep",
                           "--resume to continue it, or an empty or new folder for -o");
  }
  if (options.resume && !has_manifest && fs::exists(results_path)) {
    throw core::InputError({manifest_path.string(), 0}, "", "is missing beside " + results_path.string(),
                           "a folder written by `prefetchlab sweep` (or an empty one to start afresh)");
  }
  if (has_manifest) {
    const core::SweepManifest previous = core::SweepManifest::read(manifest_path);
    if (const std::string difference = previous.difference(manifest); !difference.empty()) {
      throw core::InputError({manifest_path.string(), 0}, "", "is another sweep: " + difference,
                             "the scenario and grid the sweep was started with");
    }
    if (!(previous.shard == shard)) {
      throw core::InputError({manifest_path.string(), 0}, "shard",
                             "was run as shard " + previous.shard.text() + ", not " + shard.text(),
                             "the same --shard as the sweep was started with");
    }
    manifest.sessions = previous.sessions;
    if (fs::exists(results_path)) {
      core::SweepRows rows = core::read_sweep_rows(results_path);
      if (rows.header.empty()) {
        fs::resize_file(results_path, 0);  // killed before its header was complete
      } else {
        if (rows.header != core::sweep_results_header(grid)) {
          throw core::InputError({results_path.string(), 1}, "", "has other columns than this sweep's",
                                 "the header `prefetchlab sweep` writes for this grid");
        }
        core::check_rows_match_grid(rows, grid, results_path);
        for (const auto& [point, text] : rows.rows) {
          if (!shard.contains(point)) {
            throw core::InputError({results_path.string(), 0}, "point",
                                   "has point " + std::to_string(point) + ", outside shard " + shard.text(),
                                   "rows of this shard only");
          }
        }
        drop_torn_tail(results_path, rows.complete_bytes, rows.torn_tail, "sweep");
        state.done = std::move(rows.rows);
      }
    }
    if (fs::exists(timings_path)) {
      std::ifstream in(timings_path, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      in.close();
      const core::CsvText csv = core::parse_csv(text);
      drop_torn_tail(timings_path, csv.complete_bytes, csv.torn_tail, "sweep");
      // A point's timing row is written just before its result row (the commit): a sweep killed
      // between the two leaves a timing for a point without a result, which runs again now.
      std::string kept;
      bool dropped = false;
      for (std::size_t i = 0; i < csv.records.size(); ++i) {
        const auto& record = csv.records[i];
        const auto point = record.fields.empty() ? std::nullopt : core::parse_point_index(record.fields[0]);
        const bool committed = i == 0 || !point || state.done.count(*point) > 0;  // an odd row stays
        if (committed) {
          kept += record.text;
        } else {
          dropped = true;
        }
      }
      if (dropped) core::write_text_atomically(timings_path, kept);
    }
  }
  ++manifest.sessions;
  core::write_json_atomically(manifest_path, manifest.to_json());
  return state;
}

// Once every point of the shard has a row, the file is rewritten in point order (atomically),
// so a finished sweep's results.csv is the same bytes whatever -j or interruptions it saw.
void sort_results(const fs::path& results_path) {
  const core::SweepRows rows = core::read_sweep_rows(results_path);
  std::string text;
  for (std::size_t c = 0; c < rows.header.size(); ++c) text += (c ? "," : "") + core::csv_escape(rows.header[c]);
  text += "\n";
  for (const auto& [point, row] : rows.rows) text += row;
  core::write_text_atomically(results_path, text);
}

int plan_slurm_sweep(const SweepOptions& options, const core::SweepGrid& grid);

core::ShardSpec shard_of(const SweepOptions& options) {
  if (options.shard.empty()) return {};
  if (options.shard == "auto") return shard_from_slurm_array([](const char* name) { return std::getenv(name); });
  return core::parse_shard_spec(options.shard);
}

void check_slurm_flags(const SweepOptions& options) {
  const core::InputLocation where{"<command line>", 0};
  if (!options.slurm) {
    for (const auto& [given, name] : {std::pair{options.submit, "--submit"}, std::pair{options.shards > 0, "--shards"},
                                      std::pair{!options.slurm_options.empty(), "--slurm-opt"}}) {
      if (given) throw core::InputError(where, name, "is given without --slurm", "--slurm with it, or neither");
    }
    return;
  }
  if (!options.shard.empty()) {
    throw core::InputError(where, "--shard", "is given with --slurm, which runs every shard as an array task",
                           "--slurm --shards N, or --shard i/N without --slurm");
  }
  if (options.jobs > 0) {
    throw core::InputError(where, "-j", "is given with --slurm: each task runs as many simulations as its allocation has CPUs",
                           "--slurm-opt cpus-per-task=N");
  }
}

int sweep(const SweepOptions& options) {
  check_slurm_flags(options);
  const core::SweepGrid grid = core::SweepGrid::load(options.grid);
  const core::ShardSpec shard = shard_of(options);
  if (grid.point_count() > kMaxPointsWithoutYes && !options.yes) {
    throw core::InputError({options.grid, grid.keys().front().line}, "",
                           "has " + std::to_string(grid.point_count()) + " points (" + axis_sizes(grid) +
                               "), more than the " + std::to_string(kMaxPointsWithoutYes) +
                               " a sweep starts without --yes",
                           "a smaller grid, or --yes to check and run all of them");
  }
  if (grid.point_count() >= kPointsWorthACheckingLine) {
    std::printf("sweep: checking all %zu points (%s) of %s before the first runs\n", grid.point_count(),
                axis_sizes(grid).c_str(), options.grid.c_str());
    std::fflush(stdout);
  }
  if (options.slurm) return plan_slurm_sweep(options, grid);
  const core::BundledData bundled = bundled_data();
  (void)core::parse_yaml_file(options.scenario);  // a missing scenario is its own error, not each point's
  std::vector<std::optional<core::Scenario>> kept = validate_points(options, grid, shard, bundled);
  FolderState state = prepare_folder(options, grid, shard);
  const int session = state.manifest.sessions;

  std::vector<std::size_t> todo;
  std::size_t shard_points = 0;
  for (std::size_t point = shard.index; point < grid.point_count(); point += shard.count) {
    ++shard_points;
    if (!state.done.count(point)) {
      todo.push_back(point);
    } else if (point / shard.count < kept.size()) {
      kept[point / shard.count].reset();
    }
  }

  const fs::path dir(options.output_dir);
  core::CsvRowWriter results = core::CsvRowWriter::append_to(dir / kResultsFile, core::sweep_results_header(grid));
  core::CsvRowWriter timings = core::CsvRowWriter::append_to(dir / kTimingsFile, kTimingsHeader);
  std::mutex mutex;  // the two writers, the counters and the progress line
  std::size_t finished = 0;
  std::map<std::string, std::size_t> by_status;

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const StopSignals signals;
  std::atomic<bool> stop{false};
  const unsigned threads = thread_count(options.jobs, todo.size());
  std::printf("sweep: %zu points (%s); %zu of %zu points of %s to run on %u threads\n", grid.point_count(),
              axis_sizes(grid).c_str(), todo.size(), shard_points,
              shard.whole() ? "the sweep" : ("shard " + shard.text()).c_str(), threads);
  std::fflush(stdout);
  SweepProgress progress(todo.size());
  try {
    parallel_for(todo.size(), threads, stop, [&](std::size_t i) {
      const std::size_t point = todo[i];
      const auto point_start = Clock::now();
      std::optional<core::Scenario> scenario;
      if (point / shard.count < kept.size()) scenario.swap(kept[point / shard.count]);
      if (!scenario) scenario = load_point(options, grid, point, bundled);
      bool interrupted = false;
      const std::vector<core::CsvField> row = simulate_point(*scenario, grid, point, &interrupted);
      scenario.reset();
      if (interrupted) {
        stop.store(true);
        return;  // an unfinished point has no row; --resume runs it again
      }
      const double wall_s = std::chrono::duration<double>(Clock::now() - point_start).count();
      std::lock_guard lock(mutex);
      // Timing first: the result row commits the point (a kill between the two leaves a timing
      // that --resume drops, never a result without its timing).
      timings.append({point, session, wall_s});
      results.append(row);
      ++by_status[row[1 + grid.keys().size()].text()];
      progress.update(++finished);
      if (StopSignals::requested()) stop.store(true);
    });
  } catch (...) {
    progress.finish();
    throw;
  }
  progress.finish();
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  results.close();
  timings.close();

  const std::size_t have = state.done.size() + finished;
  std::printf("sweep: %zu points run in %.2f s on %u threads (%.1f points/s); %zu of %zu points of %s have rows\n",
              finished, wall_s, threads, wall_s > 0 ? static_cast<double>(finished) / wall_s : 0.0, have,
              shard_points, shard.whole() ? "the sweep" : ("shard " + shard.text()).c_str());
  for (const auto& [status, count] : by_status) std::printf("  %s: %zu\n", status.c_str(), count);
  if (have < shard_points) {
    std::fprintf(stderr, "interrupted: %zu points still to run; `prefetchlab sweep ... --resume` runs them\n",
                 shard_points - have);
    return core::run_status_exit_code(core::RunStatus::kInterrupted);
  }
  sort_results(dir / kResultsFile);
  std::printf("results: %s\n", (dir / kResultsFile).string().c_str());
  return kExitOk;
}

// `sweep --slurm`: every point checked here, then the array and merge scripts written into the
// output folder (slurm_sweep_plan.hpp), and with --submit handed to sbatch. --resume writes an
// array of only the shards that lack rows.
int plan_slurm_sweep(const SweepOptions& options, const core::SweepGrid& grid) {
  const core::BundledData bundled = bundled_data();
  (void)core::parse_yaml_file(options.scenario);
  // Checked, not kept: nothing runs in this process (a shard index past every point keeps none).
  (void)validate_points(options, grid, core::ShardSpec{grid.point_count(), grid.point_count() + 1}, bundled);

  const fs::path dir = fs::absolute(options.output_dir).lexically_normal();
  check_script_path(dir, "-o", true);
  check_script_path(fs::absolute(options.scenario), "scenario", false);
  check_script_path(fs::absolute(options.grid), "--grid", false);
  fs::create_directories(dir / "slurm" / "logs");
  const FolderLock lock(dir);
  SlurmSweepPlan plan;
  plan.sweep.scenario = options.scenario;
  plan.sweep.scenario_digest = core::file_digest(options.scenario);
  plan.sweep.grid = options.grid;
  plan.sweep.grid_axes = grid.identity();
  plan.sweep.points = grid.point_count();
  plan.prefetchlab = fs::canonical("/proc/self/exe").string();
  plan.scenario = fs::canonical(options.scenario).string();
  plan.grid = fs::canonical(options.grid).string();
  plan.sbatch_options = parse_sbatch_options(options.slurm_options);
  plan.shards = options.shards > 0 ? options.shards : std::min(grid.point_count(), kDefaultSlurmShards);

  const fs::path plan_path = slurm_plan_path(dir);
  const bool has_plan = fs::exists(plan_path);
  if (!options.resume && (has_plan || fs::exists(dir / kManifestFile) || fs::exists(dir / kResultsFile))) {
    throw core::InputError({dir.string(), 0}, "", "already holds a sweep",
                           "--resume to submit what is missing, or an empty or new folder for -o");
  }
  if (options.resume && has_plan) {
    const SlurmSweepPlan previous = SlurmSweepPlan::read(plan_path);
    if (const std::string difference = previous.sweep.difference(plan.sweep); !difference.empty()) {
      throw core::InputError({plan_path.string(), 0}, "", "is another sweep: " + difference,
                             "the scenario and grid the sweep was started with");
    }
    if (options.shards > 0 && options.shards != previous.shards) {
      throw core::InputError({plan_path.string(), 0}, "shards",
                             "is " + std::to_string(previous.shards) + ", not the --shards " + std::to_string(options.shards),
                             "the shard count the sweep was started with (or no --shards)");
    }
    plan.shards = previous.shards;
    if (options.slurm_options.empty()) plan.sbatch_options = previous.sbatch_options;  // else the new ones
  }
  if (plan.shards == 0 || plan.shards > grid.point_count()) {
    throw core::InputError({"<command line>", 0}, "--shards", "is " + std::to_string(plan.shards),
                           "1 to the grid's " + std::to_string(grid.point_count()) + " points");
  }

  std::vector<std::size_t> tasks;
  std::size_t have = 0;
  for (std::size_t i = 0; i < plan.shards; ++i) {
    const ShardProgress progress = read_shard_progress(shard_folder(dir, i), plan.sweep, {i, plan.shards});
    have += progress.done;
    if (!progress.complete()) tasks.push_back(i);
  }
  fs::create_directories(dir / "shards");
  core::write_json_atomically(plan_path, plan.to_json());
  const fs::path array_path = dir / "slurm" / "array.sbatch";
  const fs::path merge_path = dir / "slurm" / "merge.sbatch";
  if (!tasks.empty()) core::write_text_atomically(array_path, sweep_array_script(plan, dir, tasks));
  core::write_text_atomically(merge_path, sweep_merge_script(plan, dir));

  std::printf("sweep --slurm: %zu points (%s) checked; %zu shards, %zu of %zu points have rows\n", grid.point_count(),
              axis_sizes(grid).c_str(), plan.shards, have, grid.point_count());
  if (tasks.empty()) {
    std::printf("  every shard is complete: only the merge is left\n");
  } else {
    std::printf("  %s: array tasks %s, shard i/%zu each in %s/i\n", array_path.string().c_str(),
                core::index_ranges(tasks, ",").c_str(), plan.shards, (dir / "shards").string().c_str());
  }
  std::printf("  %s: merge into %s after the array (afterany)\n", merge_path.string().c_str(),
              (dir / kResultsFile).string().c_str());
  if (!options.submit) {
    if (tasks.empty()) {
      std::printf("submit with: sbatch %s\n", merge_path.string().c_str());
    } else {
      std::printf("submit with: job=$(sbatch --parsable %s) && sbatch --dependency=afterany:$job %s\n",
                  array_path.string().c_str(), merge_path.string().c_str());
    }
    std::printf("or run this again with --submit --resume\n");
    return kExitOk;
  }
  const std::string array_job = tasks.empty() ? "" : sbatch_submit(array_path);
  const std::string merge_job = sbatch_submit(merge_path, array_job.empty() ? "" : "afterany:" + array_job);
  core::CsvRowWriter jobs = core::CsvRowWriter::append_to(dir / "slurm" / "jobs.csv",
                                                         {"array_job", "tasks", "merge_job"});
  jobs.append({array_job, core::index_ranges(tasks, ","), merge_job});
  jobs.close();
  if (!array_job.empty()) {
    std::printf("submitted: array job %s (tasks %s), merge job %s after it\n", array_job.c_str(),
                core::index_ranges(tasks, ",").c_str(), merge_job.c_str());
  } else {
    std::printf("submitted: merge job %s\n", merge_job.c_str());
  }
  std::printf("progress: prefetchlab sweep-status %s\n", dir.string().c_str());
  return kExitOk;
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* command = app.add_subcommand(
      "sweep",
      "Run a scenario over a grid of values in parallel; one results.csv row per finished point");
  command->footer(
      "GRID.yaml maps dotted scenario keys to lists, taken as a product in file order (first key\n"
      "slowest); a `zip:` block of equal-length lists is one axis whose keys vary together.\n"
      "Points are numbered from 0 in that order. Writes DIR/results.csv (point, the grid keys,\n"
      "status and summary metrics; a row appended as each point finishes, sorted by point once all\n"
      "are done), DIR/timings.csv (point, session, wall_s) and DIR/sweep.json. No per-run files.\n"
      "--resume runs only the points without a row (a torn last row is dropped); it must be the\n"
      "same scenario, grid and shard. --shard i/N runs the points p with p mod N = i; join the\n"
      "shard folders with `prefetchlab merge`. A grid of more than 1000000 points is refused (with\n"
      "its count) unless --yes is given. -j defaults to the CPUs the process may use (its affinity\n"
      "mask: a Slurm or cgroup allocation, taskset). Exit code 0 when every point has a row (an OOM\n"
      "point is a row), 2 for bad input, 130 when interrupted.\n"
      "--slurm writes a Slurm array instead of running: task i runs `sweep --shard i/N --resume` in\n"
      "DIR/shards/i with -j from its CPUs; the merge job (after the array, afterany) writes\n"
      "DIR/results.csv or says which shards miss points. --submit runs sbatch; --slurm --resume\n"
      "writes and submits only the shards that lack rows. `prefetchlab sweep-status DIR` shows progress.");
  command->add_option("scenario", options->scenario, "scenario YAML")->required();
  command->add_option("--grid", options->grid, "grid YAML: dotted scenario keys to lists of values")->required();
  command->add_option("-o,--output", options->output_dir, "output folder")->required();
  command->add_option("-j,--jobs", options->jobs, "simulations in parallel (default: the CPUs this process may use, sched_getaffinity)");
  command->add_flag("--resume", options->resume, "continue the sweep in DIR: run only points without a row");
  command->add_option("--shard", options->shard,
                      "i/N: run only the points p with p mod N = i (i from 0); auto: the Slurm array task's "
                      "(SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT)");
  command->add_flag("--slurm", options->slurm,
                    "check every point, then write DIR/slurm/array.sbatch (a task per shard) and merge.sbatch");
  command->add_option("--shards", options->shards, "with --slurm: array tasks (default: 8, or the points if fewer)");
  command->add_option("--slurm-opt", options->slurm_options,
                      "with --slurm: K=V, an sbatch option for the scripts (partition=gpu, time=1:00:00, "
                      "cpus-per-task=8, ...); repeatable");
  command->add_flag("--submit", options->submit, "with --slurm: submit the array and the merge with sbatch");
  command->add_flag("--yes", options->yes,
                    "run a grid of more than " + std::to_string(kMaxPointsWithoutYes) +
                        " points (refused without it, with the count)");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return sweep(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps

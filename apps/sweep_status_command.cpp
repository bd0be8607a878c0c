#include "sweep_status_command.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command_context.hpp"
#include "apps/search/sweep_results.hpp"
#include "apps/slurm/slurm_commands.hpp"
#include "apps/slurm/slurm_sweep_plan.hpp"
#include "core/input/input_error.hpp"
#include "core/io/csv_reader.hpp"

namespace prefetchlab::apps {
namespace {

namespace fs = std::filesystem;

struct StatusOptions {
  std::string dir;
  bool no_squeue = false;
};

std::string shard_line(const ShardProgress& p) {
  char text[160];
  if (!p.started) {
    std::snprintf(text, sizeof text, "not started (0 of %zu points)", p.points);
  } else if (p.complete()) {
    std::snprintf(text, sizeof text, "complete, %zu of %zu points (%d session%s)", p.done, p.points, p.sessions,
                  p.sessions == 1 ? "" : "s");
  } else {
    std::snprintf(text, sizeof text, "%zu of %zu points, %zu to run (%d session%s)", p.done, p.points, p.points - p.done,
                  p.sessions, p.sessions == 1 ? "" : "s");
  }
  return text;
}

// The last submission's job ids from DIR/slurm/jobs.csv (array, merge); empty when none.
std::vector<std::string> last_jobs(const fs::path& jobs_path) {
  std::ifstream in(jobs_path, std::ios::binary);
  if (!in) return {};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const core::CsvText csv = core::parse_csv(text);
  if (csv.records.size() < 2 || csv.records.back().fields.size() != 3) return {};
  const auto& fields = csv.records.back().fields;
  std::vector<std::string> jobs;
  if (!fields[0].empty()) jobs.push_back(fields[0]);
  jobs.push_back(fields[2]);
  return jobs;
}

int sweep_status(const StatusOptions& options) {
  const fs::path dir(options.dir);
  std::vector<ShardProgress> shards;
  core::SweepManifest sweep;
  const bool slurm = fs::exists(slurm_plan_path(dir));
  if (slurm) {
    const SlurmSweepPlan plan = SlurmSweepPlan::read(slurm_plan_path(dir));
    sweep = plan.sweep;
    for (std::size_t i = 0; i < plan.shards; ++i) {
      shards.push_back(read_shard_progress(shard_folder(dir, i), sweep, {i, plan.shards}));
    }
  } else if (fs::exists(dir / "sweep.json")) {
    sweep = core::SweepManifest::read(dir / "sweep.json");
    shards.push_back(read_shard_progress(dir, sweep, sweep.shard));
  } else {
    throw core::InputError({dir.string(), 0}, "", "holds no sweep (no slurm/plan.json, no sweep.json)",
                           "a folder written by `prefetchlab sweep` or `sweep --slurm`");
  }

  std::size_t points = 0, done = 0, timed = 0;
  double wall_s = 0;
  for (const auto& s : shards) {
    points += s.points;
    done += s.done;
    timed += s.timed_points;
    wall_s += s.timed_wall_s;
  }
  std::printf("sweep-status: %s: %zu points of %s over %s%s\n", dir.string().c_str(), sweep.points,
              sweep.scenario.c_str(), sweep.grid.c_str(),
              slurm ? (" in " + std::to_string(shards.size()) + " shards (Slurm array)").c_str()
                    : (sweep.shard.whole() ? "" : (", shard " + sweep.shard.text()).c_str()));
  if (slurm || !sweep.shard.whole()) {
    for (const auto& s : shards) std::printf("  shard %s: %s\n", s.shard.text().c_str(), shard_line(s).c_str());
  }
  std::printf("  %zu of %zu points have rows (%.1f%%)", done, points, points ? 100.0 * static_cast<double>(done) / static_cast<double>(points) : 100.0);
  if (timed > 0 && done < points) {
    const double per_point_s = wall_s / static_cast<double>(timed);
    std::printf("; %.2f s per point so far: about %.0f CPU-seconds of simulation left", per_point_s,
                per_point_s * static_cast<double>(points - done));
  }
  std::printf("\n");
  if (slurm) {
    const fs::path merged = dir / "results.csv";
    if (fs::exists(merged) && fs::exists(dir / "sweep.json")) {
      std::printf("  merged: %s, %zu of %zu points\n", merged.string().c_str(), core::read_sweep_rows(merged).rows.size(),
                  sweep.points);
    } else {
      std::printf("  merged: not yet (the merge job writes %s)\n", merged.string().c_str());
    }
    const std::vector<std::string> jobs = last_jobs(dir / "slurm" / "jobs.csv");
    if (!jobs.empty()) {
      std::string ids;
      for (const auto& job : jobs) ids += (ids.empty() ? "" : ",") + job;
      std::printf("  last submission: job%s %s (slurm/jobs.csv)\n", jobs.size() > 1 ? "s" : "", ids.c_str());
      if (!options.no_squeue) {
        // Jobs that have left the queue are not listed: their shards' folders say how they ended.
        const CommandResult queue = run_command({"squeue", "-h", "-j", ids, "-o", "%i %T %r"});
        if (queue.exit_code == 0) {
          std::istringstream lines(queue.output);
          std::string line;
          bool any = false;
          while (std::getline(lines, line)) {
            if (line.empty()) continue;
            std::printf("  squeue: %s\n", line.c_str());
            any = true;
          }
          if (!any) std::printf("  squeue: none of them is queued or running\n");
        } else {
          std::string why = queue.output.substr(0, queue.output.find('\n'));
          std::printf("  squeue: not answered (%s)\n", why.c_str());
        }
      }
    }
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_sweep_status_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* command = app.add_subcommand("sweep-status", "How far a sweep (or a Slurm sweep's shards) has got");
  command->footer(
      "Reads DIR's folders only (a folder is the truth about which points have rows): for a\n"
      "`sweep --slurm` folder each shard's points with rows, the simulation time left at the mean\n"
      "time per point so far (timings.csv), whether the merge has written DIR/results.csv, and the\n"
      "last submission's jobs as squeue lists them (--no-squeue: not asked). Exit code 0, or 2\n"
      "when DIR holds no sweep.");
  command->add_option("dir", options->dir, "the sweep's output folder")->required();
  command->add_flag("--no-squeue", options->no_squeue, "do not ask squeue about the submitted jobs");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return sweep_status(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps

#pragma once
// A sweep run as a Slurm array (`sweep --slurm`), and how far its shards have got.
//   DIR/slurm/plan.json     this plan: the sweep, its shard count, what the tasks run
//   DIR/slurm/array.sbatch  one array task per shard;  DIR/slurm/merge.sbatch  the merge
//   DIR/slurm/jobs.csv      every submission's job ids;  DIR/slurm/logs/  the jobs' output
//   DIR/shards/<i>/         shard i/N: an ordinary `sweep --shard i/N` folder
//   DIR/results.csv         the merged results, once the merge job has run
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/search/sweep_manifest.hpp"
#include "apps/slurm/sbatch_options.hpp"

namespace prefetchlab::apps {

struct SlurmSweepPlan {
  core::SweepManifest sweep;  // the whole sweep (shard 0/1)
  std::size_t shards = 0;     // N array tasks, shard i/N each
  // Absolute paths, so the scripts run from any working directory on any node of the cluster
  // that shares the file system.
  std::string prefetchlab;
  std::string scenario;
  std::string grid;
  std::vector<SbatchOption> sbatch_options;

  nlohmann::ordered_json to_json() const;
  // Throws core::InputError naming the file for a missing or malformed plan.
  static SlurmSweepPlan read(const std::filesystem::path& path);
};

std::filesystem::path slurm_plan_path(const std::filesystem::path& dir);
std::filesystem::path shard_folder(const std::filesystem::path& dir, std::size_t shard);

// One shard folder's state, read from its files (never from Slurm: a folder is the truth about
// which points have rows, whatever happened to the job).
struct ShardProgress {
  core::ShardSpec shard;
  std::size_t points = 0;     // of the sweep in this shard
  std::size_t done = 0;       // with a results row
  bool started = false;       // the folder has a sweep.json
  int sessions = 0;           // runs of `sweep` on the folder
  double timed_wall_s = 0;    // timings.csv: the wall time of the points with a row
  std::size_t timed_points = 0;

  bool complete() const { return done == points; }
};

// `folder` holds shard `shard` of a sweep of `total_points` points (a missing folder: not
// started). Throws core::InputError for a folder of another sweep than `sweep`, or of another
// shard.
ShardProgress read_shard_progress(const std::filesystem::path& folder, const core::SweepManifest& sweep,
                                  core::ShardSpec shard);

}  // namespace prefetchlab::apps

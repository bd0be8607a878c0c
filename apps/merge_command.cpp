#include "merge_command.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "command_context.hpp"
#include "folder_lock.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
#include "core/scenario/index_ranges.hpp"
#include "apps/search/sweep_manifest.hpp"
#include "apps/search/sweep_results.hpp"

namespace prefetchlab::apps {
namespace {

namespace fs = std::filesystem;

struct MergeOptions {
  std::string output_dir;
  std::vector<std::string> shard_dirs;
  bool allow_missing = false;
};

// "3, 7-9, 12" for an error message, at most 10 ranges.
std::string describe_points(const std::vector<std::size_t>& points) { return core::index_ranges(points, ", ", 10); }

int merge(const MergeOptions& options) {
  const fs::path out_dir(options.output_dir);
  std::optional<core::SweepManifest> sweep;
  std::vector<std::string> header;
  std::map<std::size_t, std::pair<std::string, std::string>> rows;  // point -> (row, its folder)
  std::vector<std::string> not_started;
  std::set<std::size_t> shard_counts;  // N of the shards' i/N
  for (const auto& shard_dir : options.shard_dirs) {
    const fs::path dir(shard_dir);
    std::error_code ec;
    if (fs::equivalent(dir, out_dir, ec)) {
      throw core::InputError({shard_dir, 0}, "", "is also the output folder", "an output folder apart from the shards");
    }
    if (!fs::exists(dir / "sweep.json")) {
      // A shard whose task never ran (a Slurm array task cancelled before it started): its
      // points are reported missing below, with the shards that hold them.
      std::cerr << "note: " << shard_dir << ": no sweep.json: this shard never started\n";
      not_started.push_back(shard_dir);
      continue;
    }
    const core::SweepManifest manifest = core::SweepManifest::read(dir / "sweep.json");
    shard_counts.insert(manifest.shard.count);
    if (!sweep) {
      sweep = manifest;
    } else if (const std::string difference = sweep->difference(manifest); !difference.empty()) {
      throw core::InputError({(dir / "sweep.json").string(), 0}, "",
                             "is another sweep than " + options.shard_dirs.front() + "'s: " + difference,
                             "shards of one sweep (same scenario and grid)");
    }
    const fs::path results_path = dir / "results.csv";
    const core::SweepRows shard_rows = core::read_sweep_rows(results_path);
    if (shard_rows.torn_tail) {
      std::cerr << "note: " << results_path.string() << ": ignoring a partial last row (killed mid-write)\n";
    }
    if (shard_rows.header.empty()) continue;  // a shard killed before writing its header
    if (header.empty()) {
      header = shard_rows.header;
    } else if (shard_rows.header != header) {
      throw core::InputError({results_path.string(), 1}, "", "has other columns than the shards before it",
                             "shards of one sweep (same header)");
    }
    for (const auto& [point, text] : shard_rows.rows) {
      if (point >= sweep->points) {
        throw core::InputError({results_path.string(), 0}, "point",
                               "has point " + std::to_string(point) + ", the sweep has " +
                                   std::to_string(sweep->points) + " points",
                               "rows of this sweep only");
      }
      const auto [it, inserted] = rows.emplace(point, std::make_pair(text, shard_dir));
      if (!inserted && it->second.first != text) {
        throw core::InputError({results_path.string(), 0}, "point",
                               "has point " + std::to_string(point) + " with other values than in " +
                                   it->second.second,
                               "the same row for a point in every shard that ran it");
      }
    }
  }

  if (!sweep) {
    throw core::InputError({options.shard_dirs.front(), 0}, "", "no shard folder holds a sweep.json: none started",
                           "shard folders written by `prefetchlab sweep --shard i/N`");
  }
  std::vector<std::size_t> missing;
  std::map<std::size_t, std::size_t> missing_by_shard;  // shard index -> points without a row
  for (std::size_t point = 0; point < sweep->points; ++point) {
    if (rows.count(point)) continue;
    missing.push_back(point);
    if (shard_counts.size() == 1) ++missing_by_shard[point % *shard_counts.begin()];
  }
  std::string by_shard;  // "shard 1/3: 3 points, shard 2/3: 4 points"
  for (const auto& [index, count] : missing_by_shard) {
    by_shard += (by_shard.empty() ? "; by shard: " : ", ") + std::to_string(index) + "/" +
                std::to_string(*shard_counts.begin()) + " misses " + std::to_string(count);
  }
  if (!missing.empty() && !options.allow_missing) {
    throw core::InputError({options.shard_dirs.front(), 0}, "",
                           std::to_string(missing.size()) + " of " + std::to_string(sweep->points) +
                               " points have no row in any shard (points " + describe_points(missing) + by_shard + ")",
                           "every shard finished (`sweep --resume --shard i/N` completes one, `sweep --slurm "
                           "--resume --submit` re-submits the shards that miss points), or --allow-missing");
  }
  if (header.empty()) {
    throw core::InputError({options.shard_dirs.front(), 0}, "", "no shard has a results.csv header",
                           "shard folders written by `prefetchlab sweep`");
  }

  fs::create_directories(out_dir);
  const FolderLock lock(out_dir);
  std::string text;
  for (std::size_t c = 0; c < header.size(); ++c) text += (c ? "," : "") + core::csv_escape(header[c]);
  text += "\n";
  for (const auto& [point, row] : rows) text += row.first;
  core::write_text_atomically(out_dir / "results.csv", text);
  // The merged folder describes the whole sweep, so `sweep --resume -o OUT_DIR` can fill gaps.
  core::SweepManifest merged = *sweep;
  merged.shard = core::ShardSpec{};
  core::write_json_atomically(out_dir / "sweep.json", merged.to_json());
  std::cout << "merge: " << rows.size() << " of " << sweep->points << " points from " << options.shard_dirs.size()
            << " folders into " << (out_dir / "results.csv").string() << "\n";
  if (!missing.empty()) {
    std::cerr << "missing: " << missing.size() << " points (" << describe_points(missing) << by_shard << ")\n";
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_merge_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* command = app.add_subcommand("merge", "Join the results of a sharded sweep into one results.csv");
  command->footer(
      "Reads each SHARD_DIR's sweep.json and results.csv (written by `prefetchlab sweep --shard i/N`)\n"
      "and writes OUT_DIR/results.csv, every row once, sorted by point, plus OUT_DIR/sweep.json.\n"
      "Errors (exit 2): shards of different sweeps (scenario, grid) or headers, a point whose rows\n"
      "differ between shards, and points with no row in any shard — listed; with --allow-missing\n"
      "those are reported on stderr and the rows present are written.");
  command->add_option("output", options->output_dir, "output folder")->required();
  command->add_option("shards", options->shard_dirs, "shard folders")->required();
  command->add_flag("--allow-missing", options->allow_missing, "write the rows present even if points are missing");
  command->callback([options, exit_code] { *exit_code = run_guarded([&] { return merge(*options); }); });
  return command;
}

}  // namespace prefetchlab::apps

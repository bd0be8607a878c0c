#include "merge_command.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "command_context.hpp"
#include "core/io/csv_row_writer.hpp"
#include "core/input/input_error.hpp"
#include "core/io/json_file.hpp"
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

// "3, 7-9, 12" for an error message, at most `limit` ranges.
std::string describe_points(const std::vector<std::size_t>& points, std::size_t limit = 10) {
  std::string out;
  std::size_t ranges = 0;
  for (std::size_t i = 0; i < points.size();) {
    std::size_t j = i;
    while (j + 1 < points.size() && points[j + 1] == points[j] + 1) ++j;
    if (ranges++ == limit) return out + ", ...";
    // Appended piecewise: GCC 12's LTO flags `const char* + std::string` here with a false
    // -Wstringop-overflow.
    if (!out.empty()) out += ", ";
    out += std::to_string(points[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(points[j]);
    }
    i = j + 1;
  }
  return out;
}

int merge(const MergeOptions& options) {
  const fs::path out_dir(options.output_dir);
  std::optional<core::SweepManifest> sweep;
  std::vector<std::string> header;
  std::map<std::size_t, std::pair<std::string, std::string>> rows;  // point -> (row, its folder)
  for (const auto& shard_dir : options.shard_dirs) {
    const fs::path dir(shard_dir);
    std::error_code ec;
    if (fs::equivalent(dir, out_dir, ec)) {
      throw core::InputError({shard_dir, 0}, "", "is also the output folder", "an output folder apart from the shards");
    }
    const core::SweepManifest manifest = core::SweepManifest::read(dir / "sweep.json");
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

  std::vector<std::size_t> missing;
  for (std::size_t point = 0; point < sweep->points; ++point) {
    if (!rows.count(point)) missing.push_back(point);
  }
  if (!missing.empty() && !options.allow_missing) {
    throw core::InputError({options.shard_dirs.front(), 0}, "",
                           std::to_string(missing.size()) + " of " + std::to_string(sweep->points) +
                               " points have no row in any shard (points " + describe_points(missing) + ")",
                           "every shard finished (`sweep --resume --shard i/N` completes one), or --allow-missing");
  }
  if (header.empty()) {
    throw core::InputError({options.shard_dirs.front(), 0}, "", "no shard has a results.csv header",
                           "shard folders written by `prefetchlab sweep`");
  }

  fs::create_directories(out_dir);
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
    std::cerr << "missing: " << missing.size() << " points (" << describe_points(missing) << ")\n";
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

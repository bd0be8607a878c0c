#include "apps/slurm/slurm_sweep_plan.hpp"

#include <fstream>
#include <iterator>
#include <set>

#include "apps/search/sweep_results.hpp"
#include "core/input/input_error.hpp"
#include "core/io/csv_reader.hpp"

namespace prefetchlab::apps {

namespace fs = std::filesystem;

nlohmann::ordered_json SlurmSweepPlan::to_json() const {
  nlohmann::ordered_json out;
  out["sweep"] = sweep.to_json();
  out["shards"] = shards;
  out["prefetchlab"] = prefetchlab;
  out["scenario"] = scenario;
  out["grid"] = grid;
  out["sbatch_options"] = nlohmann::ordered_json::array();
  for (const auto& option : sbatch_options) out["sbatch_options"].push_back({option.key, option.value});
  return out;
}

SlurmSweepPlan SlurmSweepPlan::read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw core::InputError({path.string(), 0}, "", "cannot be read", "the plan.json `prefetchlab sweep --slurm` writes");
  SlurmSweepPlan plan;
  try {
    const auto json = nlohmann::ordered_json::parse(in);
    plan.sweep = core::SweepManifest::from_json(json.at("sweep"));
    plan.shards = json.at("shards").get<std::size_t>();
    plan.prefetchlab = json.at("prefetchlab").get<std::string>();
    plan.scenario = json.at("scenario").get<std::string>();
    plan.grid = json.at("grid").get<std::string>();
    for (const auto& option : json.at("sbatch_options")) {
      plan.sbatch_options.push_back({option.at(0).get<std::string>(), option.at(1).get<std::string>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw core::InputError({path.string(), 0}, "", std::string("is not a Slurm sweep plan (") + e.what() + ")",
                           "the plan.json `prefetchlab sweep --slurm` writes");
  }
  if (plan.shards == 0 || plan.shards > plan.sweep.points) {
    throw core::InputError({path.string(), 0}, "shards", "is " + std::to_string(plan.shards),
                           "1 to the sweep's " + std::to_string(plan.sweep.points) + " points");
  }
  return plan;
}

fs::path slurm_plan_path(const fs::path& dir) { return dir / "slurm" / "plan.json"; }

fs::path shard_folder(const fs::path& dir, std::size_t shard) { return dir / "shards" / std::to_string(shard); }

ShardProgress read_shard_progress(const fs::path& folder, const core::SweepManifest& sweep, core::ShardSpec shard) {
  ShardProgress progress;
  progress.shard = shard;
  progress.points = sweep.points > shard.index ? (sweep.points - shard.index + shard.count - 1) / shard.count : 0;
  const fs::path manifest_path = folder / "sweep.json";
  if (!fs::exists(manifest_path)) return progress;
  const core::SweepManifest manifest = core::SweepManifest::read(manifest_path);
  if (const std::string difference = sweep.difference(manifest); !difference.empty()) {
    throw core::InputError({manifest_path.string(), 0}, "", "is another sweep: " + difference, "a shard of this sweep");
  }
  if (!(manifest.shard == shard)) {
    throw core::InputError({manifest_path.string(), 0}, "shard", "is " + manifest.shard.text() + ", not " + shard.text(),
                           "the shard its folder is named for");
  }
  progress.started = true;
  progress.sessions = manifest.sessions;
  std::set<std::size_t> with_rows;
  if (fs::exists(folder / "results.csv")) {
    for (const auto& [point, row] : core::read_sweep_rows(folder / "results.csv").rows) with_rows.insert(point);
  }
  progress.done = with_rows.size();
  if (std::ifstream in(folder / "timings.csv", std::ios::binary); in) {
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const core::CsvText csv = core::parse_csv(text);
    for (std::size_t i = 1; i < csv.records.size(); ++i) {  // point,session,wall_s
      const auto& fields = csv.records[i].fields;
      if (fields.size() != 3) continue;
      const auto point = core::parse_point_index(fields[0]);
      if (!point || !with_rows.count(*point)) continue;  // a timing without its row runs again
      try {
        progress.timed_wall_s += std::stod(fields[2]);
        ++progress.timed_points;
      } catch (const std::exception&) {
        // a malformed time is left out of the estimate, not an error of the status
      }
    }
  }
  return progress;
}

}  // namespace prefetchlab::apps

#pragma once
// DIR/sweep.json: which sweep a results folder holds (scenario, grid, point count, shard), so
// `--resume` and `merge` can refuse to mix rows of different sweeps. A whole document, written
// atomically; `sessions` counts the runs of `sweep` on the folder (timings.csv's `session`).
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/search/shard_spec.hpp"

namespace prefetchlab::core {

struct SweepManifest {
  std::string scenario;         // path as given on the command line (for people)
  std::string scenario_digest;  // FNV-1a 64 of the scenario file's bytes, hex
  std::string grid;             // path as given (for people)
  nlohmann::ordered_json grid_axes;  // SweepGrid::identity()
  std::size_t points = 0;       // in the whole grid, every shard
  ShardSpec shard;              // 0/1 = not sharded (also what `merge` writes)
  int sessions = 0;

  nlohmann::ordered_json to_json() const;
  // Throws nlohmann::json::exception for a missing or mistyped field, InputError for a bad shard.
  static SweepManifest from_json(const nlohmann::ordered_json& json);
  // Throws InputError naming the file for a missing or malformed manifest.
  static SweepManifest read(const std::filesystem::path& path);

  // "" when `other` describes the same sweep's points (scenario bytes, grid axes, point count);
  // else what differs, for an error message. Shards are compared by the caller.
  std::string difference(const SweepManifest& other) const;
};

// FNV-1a 64 of a file's bytes as 16 hex digits. Throws InputError when it cannot be read.
std::string file_digest(const std::filesystem::path& path);

}  // namespace prefetchlab::core

#include "apps/search/sweep_manifest.hpp"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "core/input/input_error.hpp"
#include "prefetchlab/version.hpp"

namespace prefetchlab::core {

std::string file_digest(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string(), 0}, "", "cannot be read", "a readable file");
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (std::istreambuf_iterator<char> it(in), end; it != end; ++it) {
    hash ^= static_cast<unsigned char>(*it);
    hash *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

nlohmann::ordered_json SweepManifest::to_json() const {
  nlohmann::ordered_json out;
  out["tool"] = {{"name", "prefetchlab"}, {"version", kVersion}};
  out["scenario"] = scenario;
  out["scenario_digest"] = scenario_digest;
  out["grid"] = grid;
  out["grid_axes"] = grid_axes;
  out["points"] = points;
  out["shard"] = shard.whole() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(shard.text());
  out["sessions"] = sessions;
  return out;
}

SweepManifest SweepManifest::from_json(const nlohmann::ordered_json& json) {
  SweepManifest manifest;
  manifest.scenario = json.at("scenario").get<std::string>();
  manifest.scenario_digest = json.at("scenario_digest").get<std::string>();
  manifest.grid = json.at("grid").get<std::string>();
  manifest.grid_axes = json.at("grid_axes");
  manifest.points = json.at("points").get<std::size_t>();
  if (const auto& shard = json.at("shard"); !shard.is_null()) {
    manifest.shard = parse_shard_spec(shard.get<std::string>());
  }
  manifest.sessions = json.at("sessions").get<int>();
  return manifest;
}

SweepManifest SweepManifest::read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path.string(), 0}, "", "cannot be read", "a sweep folder's sweep.json");
  try {
    return from_json(nlohmann::ordered_json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw InputError({path.string(), 0}, "", std::string("is not a sweep manifest (") + e.what() + ")",
                     "the sweep.json that `prefetchlab sweep` writes");
  } catch (const InputError& e) {
    throw InputError({path.string(), 0}, "shard", e.problem(), e.expected());
  }
}

std::string SweepManifest::difference(const SweepManifest& other) const {
  if (scenario_digest != other.scenario_digest) {
    return "scenario '" + other.scenario + "' differs from the sweep's '" + scenario + "' (content digest " +
           other.scenario_digest + " vs " + scenario_digest + ")";
  }
  if (grid_axes != other.grid_axes) {
    return "grid '" + other.grid + "' has other keys or values than the sweep's '" + grid + "'";
  }
  if (points != other.points) {
    return std::to_string(other.points) + " points, the sweep has " + std::to_string(points);
  }
  return {};
}

}  // namespace prefetchlab::core

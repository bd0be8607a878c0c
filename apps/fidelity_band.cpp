#include "fidelity_band.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "command_context.hpp"
#include "core/metrics/metrics.hpp"

namespace prefetchlab::apps {
namespace {

// Marketing names by generation (NVIDIA's architecture whitepapers and product pages); the first
// match in a profile's gpu.model wins, so longer names come before their prefixes.
struct GenerationName {
  std::string_view token;
  std::string_view generation;
};
constexpr GenerationName kGenerations[] = {
    {"GB200", "Blackwell"}, {"B200", "Blackwell"}, {"B100", "Blackwell"}, {"RTX 50", "Blackwell"},
    {"GH200", "Hopper"},    {"H100", "Hopper"},    {"H200", "Hopper"},    {"H800", "Hopper"},
    {"H20", "Hopper"},      {"L40", "Ada"},        {"L4", "Ada"},         {"RTX 40", "Ada"},
    {"Ada", "Ada"},         {"A100", "Ampere"},    {"A800", "Ampere"},    {"A6000", "Ampere"},
    {"A40", "Ampere"},      {"A30", "Ampere"},     {"A10", "Ampere"},     {"RTX 30", "Ampere"},
    {"V100", "Volta"},      {"RTX 20", "Turing"},  {"TITAN RTX", "Turing"}, {"T4", "Turing"},
};

// Cases at most this factor apart in ranks count as the same scale; fewer than kMinCases there
// and the whole generation is used.
constexpr double kScaleFactor = 8.0;
constexpr std::size_t kMinCases = 3;

std::string percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0f%%", 100.0 * std::fabs(fraction));
  return buffer;
}

std::string direction(double speed_error) {
  return percent(speed_error) + (speed_error >= 0 ? " faster" : " slower");
}

struct Candidate {
  std::string name;
  int ranks = 0;
  double speed_error = 0;
};

}  // namespace

double speed_signed_error(std::string_view metric, double error) {
  const bool time = metric == "step_time_s" || metric == "time_us" || metric == "host_us_per_call";
  return time ? -error : error;
}

std::string gpu_generation(std::string_view gpu_model) {
  for (const auto& g : kGenerations) {
    if (gpu_model.find(g.token) != std::string_view::npos) return std::string(g.generation);
  }
  return std::string(gpu_model);
}

double FidelityBand::median() const { return core::median(speed_errors); }

std::string FidelityBand::text() const {
  if (speed_errors.empty()) {
    return "no fidelity-corpus case runs on " + generation + " GPUs: how far this answer is off is unknown";
  }
  const auto [lo, hi] = std::minmax_element(speed_errors.begin(), speed_errors.end());
  const std::string ranks = min_ranks == max_ranks ? std::to_string(min_ranks)
                                                   : std::to_string(min_ranks) + "-" + std::to_string(max_ranks);
  std::string range;
  if (*lo >= 0) {
    range = percent(*lo) + " to " + percent(*hi) + " faster";
  } else if (*hi <= 0) {
    range = percent(*hi) + " to " + percent(*lo) + " slower";
  } else {
    range = direction(*lo) + " to " + direction(*hi);
  }
  return "cases like this (" + generation + ", " + ranks + " GPUs, " + std::to_string(speed_errors.size()) +
         " cases of the fidelity corpus, out of sample): simulated " + range + " than measured, median " +
         direction(median());
}

nlohmann::ordered_json FidelityBand::to_json() const {
  nlohmann::ordered_json j;
  j["gpu_generation"] = generation;
  j["cases"] = cases;
  if (!speed_errors.empty()) {
    j["min_ranks"] = min_ranks;
    j["max_ranks"] = max_ranks;
    const auto [lo, hi] = std::minmax_element(speed_errors.begin(), speed_errors.end());
    j["faster_than_measured_min"] = *lo;
    j["faster_than_measured_median"] = median();
    j["faster_than_measured_max"] = *hi;
  }
  j["text"] = text();
  return j;
}

FidelityBand fidelity_band(const core::Scenario& scenario, const nlohmann::json& results) {
  if (!results.is_object() || !results.contains("cases") || !results["cases"].is_array()) {
    throw std::runtime_error("not a fidelity result document (no \"cases\" list)");
  }
  FidelityBand band;
  band.generation = gpu_generation(scenario.cluster.hardware.gpu.model);
  const double ranks = static_cast<double>(scenario.cluster.world_size());
  std::vector<Candidate> generation_cases;
  for (const auto& c : results["cases"]) {
    if (c.value("kind", "") != "training" || !c.contains("gpu") || !c.contains("ranks")) continue;
    if (gpu_generation(c["gpu"].get<std::string>()) != band.generation) continue;
    const auto& oos = c["out_of_sample"];
    if (!oos.contains("error") || !oos["error"].is_number()) continue;
    generation_cases.push_back({c["case"].get<std::string>(), c["ranks"].get<int>(),
                                speed_signed_error(c["metric"].get<std::string>(), oos["error"].get<double>())});
  }
  std::vector<Candidate> near;
  for (const auto& c : generation_cases) {
    if (std::fabs(std::log(static_cast<double>(c.ranks) / ranks)) <= std::log(kScaleFactor)) near.push_back(c);
  }
  const std::vector<Candidate>& chosen = near.size() >= kMinCases ? near : generation_cases;
  for (const auto& c : chosen) {
    band.speed_errors.push_back(c.speed_error);
    band.cases.push_back(c.name);
    band.min_ranks = band.min_ranks == 0 ? c.ranks : std::min(band.min_ranks, c.ranks);
    band.max_ranks = std::max(band.max_ranks, c.ranks);
  }
  return band;
}

std::optional<nlohmann::json> bundled_fidelity_results(const std::filesystem::path& data_root) {
  const std::filesystem::path file = data_root / "bench" / "fidelity" / "results.json";
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file.string() + " is not valid JSON: " + e.what());
  }
}

std::optional<FidelityBand> bundled_fidelity_band(const core::Scenario& scenario) {
  const auto results = bundled_fidelity_results(data_root());
  if (!results) return std::nullopt;
  return fidelity_band(scenario, *results);
}

std::string fidelity_band_note(const core::Scenario& scenario) {
  const auto band = bundled_fidelity_band(scenario);
  return band ? "note: " + scenario.name + ": " + band->text() : std::string();
}

}  // namespace prefetchlab::apps

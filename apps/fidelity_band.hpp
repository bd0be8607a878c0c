#pragma once
// How far to trust a simulated answer: the fidelity corpus's training cases nearest to a
// scenario (same GPU generation, then similar scale) and how far the simulator was off on them,
// out of sample (docs/fidelity.md). Read from the corpus's committed results,
// bench/fidelity/results.json, which the test suite keeps current (`prefetchlab fidelity --json`).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scenario/scenario.hpp"

namespace prefetchlab::apps {

// An error (simulated - real) / real signed as speed: positive when the simulator is faster than
// measured (a time metric below the measurement, a rate above it). `metric` is the case's metric
// name (fidelity_metric_name).
double speed_signed_error(std::string_view metric, double error);

// The GPU generation of a profile's gpu.model ("NVIDIA H100 SXM 80GB" -> "Hopper"), or the model
// itself when it names none this project knows.
std::string gpu_generation(std::string_view gpu_model);

struct FidelityBand {
  std::string generation;  // the scenario's GPU generation
  int min_ranks = 0;       // the ranks of the cases chosen
  int max_ranks = 0;
  // Out-of-sample errors of the cases chosen, signed as speed: positive = the simulator faster
  // than measured (a shorter step, a higher rate).
  std::vector<double> speed_errors;
  std::vector<std::string> cases;
  double median() const;
  // "cases like this (Hopper, 8-64 GPUs, 9 cases): simulated 6% to 49% faster than measured,
  // median 27%", or the line that says the corpus holds none.
  std::string text() const;
  nlohmann::ordered_json to_json() const;
};

// The cases of `results` (a `fidelity --json` document) on the scenario's GPU generation whose
// rank counts lie within 8x of the scenario's; all of that generation's cases when fewer than 3
// do. An empty band (no case of that generation) says so. Throws std::runtime_error when the
// document is not a fidelity result.
FidelityBand fidelity_band(const core::Scenario& scenario, const nlohmann::json& results);

// The bundled corpus's results (bench/fidelity/results.json under the data root), nullopt when
// the file is absent (an installed command without its corpus).
std::optional<nlohmann::json> bundled_fidelity_results(const std::filesystem::path& data_root);

// The band of `scenario` against the bundled corpus (nullopt without it): what run, compare and
// tune print and summary.json records.
std::optional<FidelityBand> bundled_fidelity_band(const core::Scenario& scenario);

// "note: NAME: cases like this ...", or empty without the bundled corpus.
std::string fidelity_band_note(const core::Scenario& scenario);

}  // namespace prefetchlab::apps

#pragma once
// The fully resolved scenario as JSON (summary.json's "scenario"): every value the run used,
// defaults included, so a result file says exactly what produced it.
#include <nlohmann/json.hpp>

#include "core/scenario/scenario.hpp"

namespace prefetchlab::core {

nlohmann::ordered_json scenario_to_json(const Scenario& scenario);

}  // namespace prefetchlab::core

#pragma once
// The coordinator configuration a scenario implies, for any executor: the effective prefetch
// bucket, max live, reuse distance, persistence (DeepSpeed's thresholds), world size.
#include <vector>

#include "core/zero/coordinator_config.hpp"
#include "core/scenario/scenario.hpp"

namespace prefetchlab::core {

CoordinatorConfig coordinator_config_for(const Scenario& scenario, const std::vector<bool>& persistent);
// The same with persistence computed from the scenario's thresholds.
CoordinatorConfig coordinator_config_for(const Scenario& scenario);

}  // namespace prefetchlab::core

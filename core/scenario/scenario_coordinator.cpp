#include "core/scenario/scenario_coordinator.hpp"

#include "core/zero/persistence.hpp"

namespace prefetchlab::core {

CoordinatorConfig coordinator_config_for(const Scenario& scenario, const std::vector<bool>& persistent) {
  CoordinatorConfig config;
  config.prefetch_bucket_numel = scenario.zero.effective_prefetch_bucket_numel();
  config.max_live_numel = scenario.zero.max_live_numel;
  config.max_reuse_distance_numel = scenario.zero.max_reuse_distance_numel;
  config.persistent = persistent;
  config.world_size = static_cast<int>(scenario.cluster.world_size());
  config.allgather_sequential = scenario.zero.allgather_sequential;
  return config;
}

CoordinatorConfig coordinator_config_for(const Scenario& scenario) {
  return coordinator_config_for(scenario, persistent_params(scenario.model, scenario.zero.param_persistence_threshold_numel,
                                                            scenario.zero.model_persistence_threshold_numel));
}

}  // namespace prefetchlab::core

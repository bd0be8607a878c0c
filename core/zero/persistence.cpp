#include "core/zero/persistence.hpp"

namespace prefetchlab::core {

std::vector<bool> persistent_params(const ModelSpec& model,
                                    std::int64_t param_persistence_threshold_numel,
                                    std::int64_t model_persistence_threshold_numel) {
  std::vector<bool> persistent(model.params.size(), false);
  std::int64_t total_numel = 0;
  for (std::size_t id = 0; id < model.params.size(); ++id) {
    const std::int64_t numel = model.params[id].numel;
    // Compare as total > threshold - numel so the default threshold (INT64 max) cannot overflow.
    if (total_numel > model_persistence_threshold_numel - numel) continue;
    if (numel <= param_persistence_threshold_numel) {
      persistent[id] = true;
      total_numel += numel;
    }
  }
  return persistent;
}

}  // namespace prefetchlab::core

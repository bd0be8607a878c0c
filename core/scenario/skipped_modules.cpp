#include "core/scenario/skipped_modules.hpp"

#include <algorithm>

namespace prefetchlab::core {

SkippedModules skipped_modules(const std::vector<DivergenceConfig>& divergence, int world_size,
                               std::size_t module_count) {
  SkippedModules skipped;
  for (const auto& entry : divergence) {
    for (int rank = 0; rank < world_size; ++rank) {
      const auto& only = entry.ranks;
      if (!only.empty() && std::find(only.begin(), only.end(), rank) == only.end()) continue;
      auto& flags = skipped[{entry.iteration, rank}];
      if (flags.empty()) flags.assign(module_count, false);
      for (const int module : entry.skipped_modules) flags[static_cast<std::size_t>(module)] = true;
    }
  }
  return skipped;
}

}  // namespace prefetchlab::core

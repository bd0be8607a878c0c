#pragma once
// The scenario's divergence section as the module order each rank runs: per (iteration, rank)
// on which something is skipped, a flag per module (a skipped module's subtree does not run
// either). Shared by the simulator and the real backend so both diverge on the same iterations.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/scenario/scenario.hpp"

namespace prefetchlab::core {

using SkippedModules = std::map<std::pair<std::int64_t, int>, std::vector<bool>>;

SkippedModules skipped_modules(const std::vector<DivergenceConfig>& divergence, int world_size,
                               std::size_t module_count);

}  // namespace prefetchlab::core

#include "core/zero/reduce_bucket.hpp"

namespace prefetchlab::core {

std::vector<int> gradient_uses(const ModelSpec& model) {
  std::vector<int> uses(model.params.size(), 0);
  for (const auto& module : model.modules) {
    for (const int p : module.param_ids) ++uses[static_cast<std::size_t>(p)];
  }
  return uses;
}

}  // namespace prefetchlab::core

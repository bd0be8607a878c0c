#include "core/moe/leaf_modules.hpp"

#include <algorithm>

namespace prefetchlab::core {
namespace {

void collect_subtree(ModelSpec& model, int module, std::vector<int>& params) {
  auto& spec = model.modules[static_cast<std::size_t>(module)];
  for (const int child : spec.children) {
    auto& child_spec = model.modules[static_cast<std::size_t>(child)];
    params.insert(params.end(), child_spec.param_ids.begin(), child_spec.param_ids.end());
    child_spec.param_ids.clear();
    child_spec.z3_hooks = false;
    child_spec.z3_leaf = false;
    collect_subtree(model, child, params);
  }
}

}  // namespace

std::vector<int> apply_z3_leaf_modules(ModelSpec& model, const std::vector<std::string>& classes) {
  std::vector<int> matched(classes.size(), 0);
  // Pre-order: a parent is met before its children, so an outer leaf takes the inner one in.
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    auto& spec = model.modules[m];
    const auto found = std::find(classes.begin(), classes.end(), spec.class_name);
    if (found == classes.end()) continue;
    ++matched[static_cast<std::size_t>(found - classes.begin())];
    if (!spec.z3_hooks) continue;  // inside a leaf already
    spec.z3_leaf = true;
    std::vector<int> params = spec.param_ids;
    collect_subtree(model, static_cast<int>(m), params);
    std::sort(params.begin(), params.end());
    params.erase(std::unique(params.begin(), params.end()), params.end());
    model.modules[m].param_ids = std::move(params);
  }
  return matched;
}

}  // namespace prefetchlab::core

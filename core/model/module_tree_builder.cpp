#include "core/model/module_tree_builder.hpp"

#include <stdexcept>
#include <utility>

namespace prefetchlab::core {

std::string join_name(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  return prefix + "." + name;
}

int ModuleTreeBuilder::add_param(const std::string& name, std::int64_t numel,
                                 std::int64_t gemm_in, std::int64_t gemm_out) {
  const int id = static_cast<int>(spec_.params.size());
  if (!param_ids_.emplace(name, id).second) {
    throw std::logic_error("ModuleTreeBuilder: parameter added twice: " + name);
  }
  spec_.params.push_back(ParamSpec{name, numel, dtype_, gemm_in, gemm_out});
  return id;
}

int ModuleTreeBuilder::param(const std::string& name) const {
  const auto found = param_ids_.find(name);
  if (found == param_ids_.end()) {
    throw std::logic_error("ModuleTreeBuilder: unknown parameter " + name);
  }
  return found->second;
}

int ModuleTreeBuilder::begin(const std::string& name, const std::string& class_name,
                             const ModuleCosts& own, std::vector<int> param_ids) {
  if (open_.empty() && !spec_.modules.empty()) {
    throw std::logic_error("ModuleTreeBuilder: a second root " + name);
  }
  const int index = static_cast<int>(spec_.modules.size());
  ModuleSpec module;
  module.name = name;
  module.class_name = class_name;
  module.param_ids = std::move(param_ids);
  module.kernels = own.kernels;
  for (const KernelSpec& kernel : own.kernels) {
    module.forward_flops += kernel.flops;
    module.forward_bytes += kernel.bytes;
  }
  module.activation_bytes = own.activation_bytes;
  if (!open_.empty()) {
    module.parent = open_.back();
    module.depth = spec_.modules[static_cast<std::size_t>(open_.back())].depth + 1;
    spec_.modules[static_cast<std::size_t>(open_.back())].children.push_back(index);
  }
  spec_.modules.push_back(std::move(module));
  open_.push_back(index);
  return index;
}

void ModuleTreeBuilder::end() {
  if (open_.empty()) throw std::logic_error("ModuleTreeBuilder: end() without begin()");
  open_.pop_back();
}

int ModuleTreeBuilder::leaf(const std::string& name, const std::string& class_name,
                            const ModuleCosts& own, std::vector<int> param_ids) {
  const int index = begin(name, class_name, own, std::move(param_ids));
  end();
  return index;
}

}  // namespace prefetchlab::core

#include "core/zero/parameter_trace.hpp"

#include <stdexcept>
#include <utility>

namespace prefetchlab::core {

ParameterTrace ParameterTrace::build(std::vector<int> module_order,
                                     const std::vector<std::vector<int>>& module_params) {
  ParameterTrace trace;
  trace.modules_ = std::move(module_order);
  for (std::size_t step = 0; step < trace.modules_.size(); ++step) {
    const int module = trace.modules_[step];
    if (module < 0 || static_cast<std::size_t>(module) >= module_params.size()) {
      throw std::out_of_range("ParameterTrace::build: module index out of range");
    }
    for (const int param : module_params[static_cast<std::size_t>(module)]) {
      trace.params_.push_back(ParamInTrace{param, static_cast<int>(step)});
    }
  }
  return trace;
}

std::vector<int> ParameterTrace::param_ids() const {
  std::vector<int> ids;
  ids.reserve(params_.size());
  for (const auto& entry : params_) ids.push_back(entry.param_id);
  return ids;
}

std::vector<int> ParameterTrace::param_step_ids() const {
  std::vector<int> steps;
  steps.reserve(params_.size());
  for (const auto& entry : params_) steps.push_back(entry.step_id);
  return steps;
}

}  // namespace prefetchlab::core

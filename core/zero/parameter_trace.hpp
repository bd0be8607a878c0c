#pragma once
// The recorded module trace of one iteration (forward + backward, as executed) and the parameter
// trace DeepSpeed derives from it when recording completes (reset_step in DeepSpeed's
// deepspeed/runtime/zero/partitioned_param_coordinator.py):
// for each recorded module in order, its direct parameters sorted by ds_id, each tagged with the
// step at which that module was recorded.
#include <cstdint>
#include <vector>

#include "core/zero/trace_mode.hpp"

namespace prefetchlab::core {

// One entry of the parameter trace (DeepSpeed's __ParamInTrace).
struct ParamInTrace {
  int param_id = -1;
  int step_id = -1;  // step_id_last_used_at: the step of the module that uses it here
  friend bool operator==(const ParamInTrace&, const ParamInTrace&) = default;
};

class ParameterTrace {
 public:
  ParameterTrace() = default;

  // module_order: module indices in recorded order (step i = module_order[i], because every
  // fetch is recorded and every fetch advances the step by one). module_params[m]: the direct
  // parameters of module m, sorted by ds_id and without duplicates.
  static ParameterTrace build(std::vector<int> module_order,
                              const std::vector<std::vector<int>>& module_params);

  const std::vector<int>& modules() const { return modules_; }
  const std::vector<ParamInTrace>& params() const { return params_; }
  // The two other lists DeepSpeed compares across ranks when a recording completes.
  std::vector<int> param_ids() const;
  std::vector<int> param_step_ids() const;

 private:
  std::vector<int> modules_;
  std::vector<ParamInTrace> params_;
};

}  // namespace prefetchlab::core

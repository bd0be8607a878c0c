#pragma once
// Which parameters ZeRO-3 keeps gathered for good ("persistent"): DeepSpeed's
// stage3_param_persistence_threshold and stage3_model_persistence_threshold rule
// (mark_persistent_parameters in deepspeed/runtime/zero/parameter_offload.py).
#include <cstdint>
#include <vector>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// One flag per parameter (index = ds_id). Walks parameters in ds_id order; a parameter that
// would push the persistent total past the model threshold is skipped, otherwise it is
// persistent when its numel is at most the parameter threshold (and counts toward the total).
std::vector<bool> persistent_params(const ModelSpec& model,
                                    std::int64_t param_persistence_threshold_numel,
                                    std::int64_t model_persistence_threshold_numel);

}  // namespace prefetchlab::core

#pragma once
// ZeRO-3 leaf modules: DeepSpeed's remedy for modules whose children do not all run every time
// (a MoE block's experts). set_z3_leaf_modules(model, [MixtralSparseMoeBlock]) flags every
// module of those classes (deepspeedai/DeepSpeed deepspeed/utils/z3_leaf_module.py); hooks are
// then registered on the leaf but not below it, and the leaf's fetch gathers its whole subtree
// (parameter_offload.py, partitioned_param_coordinator.py: iter_params(m, recurse=z3_leaf_module(m))).
// So the experts' hooks never fire, the trace no longer depends on the routing, and every
// expert's parameters are gathered together when the block is entered (more memory at once).
#include <string>
#include <vector>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// Marks the modules whose class_name is one of `classes` as leaves (an outer leaf wins over one
// nested in it): the leaf's param_ids become its subtree's (ds_id order), the modules below it
// lose theirs and their hooks. Returns, per class, how many modules it matched (a class that
// matches none is the caller's error to report).
std::vector<int> apply_z3_leaf_modules(ModelSpec& model, const std::vector<std::string>& classes);

}  // namespace prefetchlab::core

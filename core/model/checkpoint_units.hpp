#pragma once
// Full activation checkpointing (training.activation_checkpointing, HF gradient_checkpointing):
// which modules are checkpoint units (the transformer layers torch.utils.checkpoint wraps) and
// which run inside one. A unit keeps only its input in the first forward; backward re-runs the
// unit's forward (DeepSpeed's hooks fire again) right before the unit's backward. Shared by the
// simulator and the real backend so both checkpoint the same modules.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

struct CheckpointUnits {
  std::vector<bool> unit;    // per module: a checkpoint unit
  std::vector<bool> inside;  // per module: a unit or a descendant of one
};

// Whether modules of this class are checkpoint units (HF's gradient checkpointing wraps them).
bool is_checkpoint_unit_class(std::string_view cls);

// All false when `enabled` is false.
CheckpointUnits checkpoint_units(const ModelSpec& model, bool enabled);

// What a unit keeps from its first forward: its input, micro_batch x seq_len x hidden.
std::int64_t checkpoint_input_bytes(const ModelSpec& model, std::int64_t micro_batch, std::int64_t seq_len,
                                    DType dtype);

}  // namespace prefetchlab::core

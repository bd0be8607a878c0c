#include "core/model/checkpoint_units.hpp"

#include <string>

namespace prefetchlab::core {

CheckpointUnits checkpoint_units(const ModelSpec& model, bool enabled) {
  CheckpointUnits units;
  units.unit.assign(model.modules.size(), false);
  units.inside.assign(model.modules.size(), false);
  if (!enabled) return units;
  // Modules come parents first, so a parent's flag is final before its children's.
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    const std::string& cls = model.modules[m].class_name;
    units.unit[m] = cls == "GPT2Block" || cls == "BertLayer" || cls == "LlamaDecoderLayer";
    const int parent = model.modules[m].parent;
    units.inside[m] = units.unit[m] || (parent >= 0 && units.inside[static_cast<std::size_t>(parent)]);
  }
  return units;
}

std::int64_t checkpoint_input_bytes(const ModelSpec& model, std::int64_t micro_batch, std::int64_t seq_len,
                                    DType dtype) {
  return micro_batch * seq_len * model.hidden_size * dtype_bytes(dtype);
}

}  // namespace prefetchlab::core

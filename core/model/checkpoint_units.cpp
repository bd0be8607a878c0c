#include "core/model/checkpoint_units.hpp"

#include <string>
#include <string_view>

namespace prefetchlab::core {

// The layers Hugging Face's gradient checkpointing wraps: each model's repeated block
// (GradientCheckpointingLayer subclasses in transformers' modeling_layers.py; before it, the
// layers each model's forward passed to self._gradient_checkpointing_func). Every decoder-only
// family this project builds names its block <Family>DecoderLayer (LlamaDecoderLayer,
// MistralDecoderLayer, Qwen2DecoderLayer, Qwen2MoeDecoderLayer, GemmaDecoderLayer,
// Gemma2DecoderLayer, Phi3DecoderLayer, MixtralDecoderLayer); GPT-2 and BERT name theirs
// GPT2Block and BertLayer.
bool is_checkpoint_unit_class(std::string_view cls) {
  constexpr std::string_view kDecoderLayer = "DecoderLayer";
  return cls == "GPT2Block" || cls == "BertLayer" ||
         (cls.size() > kDecoderLayer.size() && cls.ends_with(kDecoderLayer));
}

CheckpointUnits checkpoint_units(const ModelSpec& model, bool enabled) {
  CheckpointUnits units;
  units.unit.assign(model.modules.size(), false);
  units.inside.assign(model.modules.size(), false);
  if (!enabled) return units;
  // Modules come parents first, so a parent's flag is final before its children's.
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    const std::string& cls = model.modules[m].class_name;
    units.unit[m] = is_checkpoint_unit_class(cls);
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

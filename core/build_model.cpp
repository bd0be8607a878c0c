#include <stdexcept>

#include "model_builders.hpp"

namespace prefetchlab::core {

ModelSpec build_model(const ModelConfig& config, const std::string& name, DType dtype) {
  ModelSpec model;
  switch (config.architecture) {
    case Architecture::kGpt2: model = build_gpt2_model(config, name, dtype); break;
    case Architecture::kBert: model = build_bert_model(config, name, dtype); break;
    case Architecture::kLlama: model = build_llama_model(config, name, dtype); break;
    default: throw std::logic_error("build_model: unknown architecture");
  }
  model.max_positions = config.max_positions;
  return model;
}

}  // namespace prefetchlab::core

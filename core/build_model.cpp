#include <stdexcept>

#include "model_builders.hpp"

namespace prefetchlab::core {

ModelSpec build_model(const ModelConfig& config, const std::string& name, DType dtype) {
  switch (config.architecture) {
    case Architecture::kGpt2: return build_gpt2_model(config, name, dtype);
    case Architecture::kBert: return build_bert_model(config, name, dtype);
    case Architecture::kLlama: return build_llama_model(config, name, dtype);
  }
  throw std::logic_error("build_model: unknown architecture");
}

}  // namespace prefetchlab::core
